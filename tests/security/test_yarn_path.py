"""A yarn setting a run writes does not make your yarn run its code.

Yarn (classic and later, also started by corepack) reads ``.yarnrc.yml`` (and classic's
``.yarnrc``) in the working directory and above, and runs the JavaScript file its ``yarnPath``
(``yarn-path``) names instead of itself, at every command: ``yarn --version`` in the project would
run a file a run wrote. Both files at the top of the project are kept, and so are ``.yarn/releases``
(where ``yarn set version`` puts the file ``yarnPath`` names) and ``.yarn/plugins`` (the plugins
``.yarnrc.yml`` loads) whole. The judge is yarn on the host; the control is the ``none`` backend,
where the same run makes ``yarn --version`` run its code.
"""

from __future__ import annotations

import shutil

import pytest

from tests.security.conftest import CONTROL, on_host

YARN = shutil.which("yarn")
pytestmark = pytest.mark.skipif(YARN is None, reason="yarn not found")
FIRED = "YARN-PATH-FROM-THE-RUN"
SETTING = {".yarnrc.yml": "yarnPath: ./y.cjs", ".yarnrc": 'yarn-path "./y.cjs"'}


def plant(name: str, wait: bool = False) -> str:
    """A script in the project that prints FIRED and ``name`` naming it (then, with ``wait``,
    5 s for a guard to stop the run before it prints ``survived``)."""
    return (
        f"echo 'console.log(\"{FIRED}\")' > y.cjs && echo {CONTROL}; "
        f"echo '{SETTING[name]}' > {name}" + ("; sleep 5; echo survived" if wait else "")
    )


def host_yarn(world) -> str:
    """``yarn --version`` in the project, as the user types it."""
    return on_host(world, [str(YARN), "--version"])


@pytest.mark.parametrize("name", [".yarnrc.yml", ".yarnrc"])
def test_a_new_yarn_setting_is_removed(sbx, world, name):
    r = sbx.run(plant(name, wait=True))
    assert CONTROL in r.output and "survived" not in r.output, r.output
    assert not (world.project / name).exists()
    assert any(f"protected file {name} was created" in n for n in r.notices), r.notices
    assert FIRED not in host_yarn(world)
    # Control: without the sandbox the same run makes the user's yarn run its code.
    sbx.unconfined().run(plant(name))
    assert FIRED in host_yarn(world)


def test_the_release_yarn_path_names_is_read_only(sbx, world):
    releases = world.project / ".yarn/releases"
    releases.mkdir(parents=True)
    (releases / "yarn-9.cjs").write_text('console.log("9.9.9")\n')
    (world.project / ".yarnrc.yml").write_text("yarnPath: .yarn/releases/yarn-9.cjs\n")
    assert host_yarn(world).strip() == "9.9.9"
    cmd = f"echo 'console.log(\"{FIRED}\")' > .yarn/releases/yarn-9.cjs; echo {CONTROL}"
    r = sbx.run(cmd)
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert host_yarn(world).strip() == "9.9.9"
    r = sbx.run("mkdir -p .yarn/plugins && echo x > .yarn/plugins/p.cjs; sleep 5; echo survived")
    assert "survived" not in r.output, r.output
    assert not (world.project / ".yarn/plugins").exists()
    # Control: the rest of .yarn (its cache, install state) stays writable; without the
    # sandbox the same run makes the user's yarn run its code.
    assert (
        CONTROL in sbx.run(f"mkdir -p .yarn/cache && touch .yarn/cache/x && echo {CONTROL}").output
    )
    sbx.unconfined().run(cmd)
    assert FIRED in host_yarn(world)
