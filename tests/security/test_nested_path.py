"""A relative PATH entry is kept wherever your shell may resolve it, not only in the project's top.

With ``node_modules/.bin`` (or ``bin``, ``.venv/bin``: any relative entry but ``.`` and the empty
one) on ``PATH``, your shell looks for a command in that directory of whatever directory it is in:
a ``web/node_modules/.bin/<tool>`` a run leaves runs when you ``cd web`` and type ``<tool>``. So
the directory such an entry names is kept in every directory of the writable trees that holds its
first component (``web/node_modules``), as it is at the top (``pathguard.path_dirs``: the same
unit, the same ``sandbox.rules.path_writable``): an existing one is read-only inside the run, and
one a run makes anywhere stops it and goes to the quarantine.

The judge is a real shell on the host, started in the subdirectory with that ``PATH``; the control
is the same run through the ``none`` backend, after which the shell there runs the run's program.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import payload, pwned

TOOL = "rb-nested-tool"


def relative_path(world: World, entry: str = "node_modules/.bin") -> None:
    world.env["PATH"] = f"{entry}:{world.env['PATH']}"


def shell_in(world: World, where: str) -> str:
    """``<tool>`` typed in ``where`` by the user's shell (their PATH, its relative entry)."""
    done = subprocess.run(
        ["bash", "-c", f"{TOOL}; true"],
        cwd=world.project / where,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout + done.stderr


def plant(world: World, bin_dir: str, wait: bool = False) -> str:
    return (
        f"echo ok > other.txt && echo {CONTROL}; mkdir -p {bin_dir} && "
        f"printf '#!/bin/sh\\n{payload(world, 'path')}\\n' > {bin_dir}/{TOOL} && "
        f"chmod +x {bin_dir}/{TOOL}" + ("; sleep 5; echo survived" if wait else "")
    )


def clear(world: World) -> None:
    for f in world.home.glob("PWNED*"):
        f.unlink()


def test_a_new_relative_path_directory_in_a_subdirectory_is_removed(sbx, world):
    (world.project / "web").mkdir()
    relative_path(world)
    rb = sbx.with_config()
    r = rb.run(plant(world, "web/node_modules/.bin", wait=True))
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not (world.project / "web/node_modules/.bin").exists(), r.notices
    assert any(
        "web/node_modules/.bin" in n and "sandbox.rules.path_writable" in n for n in r.notices
    ), r.notices
    shell_in(world, "web")
    assert pwned(world) == []
    # Control: without the sandbox the user's shell in web/ runs the run's program.
    rb.unconfined().run(plant(world, "web/node_modules/.bin"))
    said = shell_in(world, "web")
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


def test_one_in_a_directory_the_run_makes_is_removed(sbx, world):
    relative_path(world, "bin")
    rb = sbx.with_config()
    r = rb.run(plant(world, "pkgs/new/bin"))
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert not (world.project / "pkgs/new/bin").exists(), r.notices
    assert (world.project / "pkgs/new").is_dir()  # what holds it stays
    assert any("pkgs/new/bin" in n and "PATH" in n for n in r.notices), r.notices
    shell_in(world, "pkgs/new")
    assert pwned(world) == []
    rb.unconfined().run(plant(world, "pkgs/new/bin"))
    said = shell_in(world, "pkgs/new")
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


def test_an_existing_one_in_a_subdirectory_is_read_only(sbx, world):
    dot_bin = world.project / "web/node_modules/.bin"
    dot_bin.mkdir(parents=True)
    (dot_bin / TOOL).write_text("#!/bin/sh\necho real-tool\n")
    (dot_bin / TOOL).chmod(0o755)
    relative_path(world)
    rb = sbx.with_config()
    attack = f"printf '#!/bin/sh\\n{payload(world, 'existing')}\\n' > web/node_modules/{TOOL}.x"
    attack += f" && mv web/node_modules/{TOOL}.x web/node_modules/.bin/{TOOL}"
    attack += f"; chmod +x web/node_modules/.bin/{TOOL}"
    r = rb.run(f"echo ok > web/other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "web/other.txt").exists()
    assert (dot_bin / TOOL).read_text() == "#!/bin/sh\necho real-tool\n"
    assert "real-tool" in shell_in(world, "web")
    assert pwned(world) == []
    rb.unconfined().run(attack)
    said = shell_in(world, "web")
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


def test_a_bin_directory_missing_under_an_existing_node_modules_may_not_appear(sbx, world):
    (world.project / "web/node_modules/left-pad").mkdir(parents=True)
    relative_path(world)
    rb = sbx.with_config()
    r = rb.run(plant(world, "web/node_modules/.bin", wait=True))
    assert CONTROL in r.output, r.output
    # The unit of web/node_modules/.bin is web/node_modules, which exists: read-only whole.
    assert "Read-only file system" in r.output, (r.output, r.notices)
    assert not (world.project / "web/node_modules/.bin").exists(), r.notices
    assert (world.project / "web/node_modules/left-pad").is_dir()
    shell_in(world, "web")
    assert pwned(world) == []


def test_path_writable_lets_runs_write_them_everywhere(sbx, world):
    """``sandbox.rules.path_writable = ["node_modules/.bin"]`` is taken in every directory too:
    the user said runs may write it."""
    (world.project / "web").mkdir()
    relative_path(world)
    rb = sbx.with_config(sandbox={"rules": {"path_writable": ["node_modules/.bin"]}})
    r = rb.run(plant(world, "web/node_modules/.bin"))
    assert CONTROL in r.output, r.output
    assert Path(world.project / "web/node_modules/.bin" / TOOL).exists(), r.notices
    assert not any("node_modules" in n for n in r.notices), r.notices
