"""A git hook manager's config a run writes does not run at your next commit.

The hook a manager installs in the git dir is kept (``.git/hooks`` is a member), but it runs what
its config in the work tree names, read again at every commit: pre-commit's
``.pre-commit-config.yaml`` (a ``repo: local`` hook with ``language: system`` and ``always_run``
runs any command), lefthook's ``lefthook.yml`` (and its other names, ``lefthook-local.*``, the
scripts in ``.lefthook/``), overcommit's ``.overcommit.yml``, hk's ``hk.pkl``, prek's
``prek.toml`` and ``.pre-commit-config.yml``. These are kept at every level: in the project's
top, in a nested repository's work tree, and wherever prek's workspaces find them. An existing one
is read-only inside the run, a new one stops the run and goes to the quarantine.

pre-commit is the real judge here (installed from PyPI into the venv, ``requirements-dev.txt``):
``pre-commit install`` on the host, a run that writes the config, then ``git commit`` on the host,
and the same run through the ``none`` backend as the control, where the commit runs the payload.
lefthook, overcommit, hk and prek are not installed: for them the file system is the judge (a new
config is removed with the notice, an existing one or its scripts stay as they were), beside the
same run through ``none``, which leaves them changed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security.conftest import CONTROL, World
from tests.security.test_hostread import git, payload, pwned

needs_pre_commit = pytest.mark.skipif(
    importlib.util.find_spec("pre_commit") is None, reason="pre-commit is not installed"
)


def config(world: World, tag: str) -> str:
    """A pre-commit config whose local hook runs the payload at every commit."""
    return (
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: x\n"
        "        name: x\n"
        f"        entry: {payload(world, tag)}\n"
        "        language: system\n"
        "        always_run: true\n"
        "        pass_filenames: false\n"
    )


BENIGN = "repos: []\n"


def install(world: World, where: Path, *, allow_missing: bool) -> None:
    """``pre-commit install`` in the repository at ``where``, as the user runs it."""
    args = ["--allow-missing-config"] if allow_missing else []
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "install", "-f", *args],
        cwd=where,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def commit(world: World, where: Path | None = None) -> str:
    """``git add -A && git commit`` on the host, as the user commits after a run."""
    git(world, "add", "-A", cwd=where)
    return git(world, "commit", "-qm", "after the run", "--allow-empty", cwd=where)


def write(path: str, text: str) -> str:
    return f"printf '%s' '{text}' > {path}"


def clear(world: World) -> None:
    for f in world.home.glob("PWNED*"):
        f.unlink()


@needs_pre_commit
def test_a_new_pre_commit_config_is_removed(sbx, world):
    install(world, world.project, allow_missing=True)
    attack = write(".pre-commit-config.yaml", config(world, "new"))
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; sleep 5; echo survived")
    assert CONTROL in r.output and (world.project / "other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not (world.project / ".pre-commit-config.yaml").exists()
    assert any("protected file .pre-commit-config.yaml was created" in n for n in r.notices), (
        r.notices
    )
    said = commit(world)
    assert pwned(world) == [], said
    # Control: without the sandbox the user's next commit runs the payload.
    sbx.unconfined().run(attack)
    said = commit(world)
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


@needs_pre_commit
def test_an_existing_pre_commit_config_is_read_only(sbx, world):
    (world.project / ".pre-commit-config.yaml").write_text(BENIGN)
    install(world, world.project, allow_missing=False)
    commit(world)
    attack = write(".pre-commit-config.yaml", config(world, "old"))
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (world.project / "other.txt").read_text() == "ok\n"
    assert (world.project / ".pre-commit-config.yaml").read_text() == BENIGN
    said = commit(world)
    assert pwned(world) == [], said
    sbx.unconfined().run(attack)
    said = commit(world)
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


@needs_pre_commit
def test_a_nested_repositorys_pre_commit_config_is_kept_too(sbx, world):
    """A repository inside the project (a vendored library, an embedded clone) with pre-commit
    installed: its work tree's config is read at a commit there, and is kept the same way."""
    lib = world.project / "vendor/lib"
    lib.mkdir(parents=True)
    git(world, "init", "-q", "-b", "main", cwd=lib, check=True)
    git(world, "commit", "-q", "--allow-empty", "-m", "init", cwd=lib, check=True)
    install(world, lib, allow_missing=True)
    attack = write("vendor/lib/.pre-commit-config.yaml", config(world, "nested"))
    r = sbx.run(f"echo ok > vendor/lib/other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and (lib / "other.txt").exists(), r.output
    assert not (lib / ".pre-commit-config.yaml").exists(), r.notices
    assert any(
        "protected file vendor/lib/.pre-commit-config.yaml was created" in n for n in r.notices
    ), r.notices
    said = commit(world, lib)
    assert pwned(world) == [], said
    clear(world)
    sbx.unconfined().run(attack)
    said = commit(world, lib)
    assert pwned(world), f"the attack does not work even without a sandbox: {said}"


# -- the managers not installed here: the file system is the judge -------------------------------

NEW_CONFIGS = [
    "lefthook.yml",
    ".lefthook.yaml",
    "lefthook-local.toml",
    ".config/lefthook.json",
    ".overcommit.yml",
    "hk.pkl",
    ".config/hk.local.pkl",
    "prek.toml",
    ".pre-commit-config.yml",
    "web/.pre-commit-config.yaml",  # a prek workspace project below the top
    "web/lefthook.yml",
]


@pytest.mark.parametrize("name", NEW_CONFIGS)
def test_a_new_hook_manager_config_is_removed(sbx, world, name):
    (world.project / "web").mkdir()
    where = str(Path(name).parent)
    attack = f"mkdir -p {where} && echo 'pre-commit: {{}}' > {name}"
    r = sbx.run(f"echo ok > web/other.txt && echo {CONTROL}; {attack}; sleep 5; echo survived")
    assert CONTROL in r.output and (world.project / "web/other.txt").exists(), r.output
    assert "survived" not in r.output, (r.output, r.notices)
    assert not (world.project / name).exists()
    assert any(f"protected file {name} was created" in n for n in r.notices), r.notices
    sbx.unconfined().run(attack)
    assert (world.project / name).exists()  # the control: the run does write it


@pytest.mark.parametrize("holder", [".lefthook", ".lefthook-local", ".git-hooks"])
def test_hook_managers_script_directories_are_read_only_whole(sbx, world, holder):
    scripts = world.project / holder / "pre-commit"
    scripts.mkdir(parents=True)
    (scripts / "lint.sh").write_text("#!/bin/sh\nexit 0\n")
    attack = (
        f"echo '{payload(world, 'script')}' >> {holder}/pre-commit/lint.sh; "
        f"echo '{payload(world, 'script')}' > {holder}/pre-commit/new.sh"
    )
    r = sbx.run(f"echo ok > other.txt && echo {CONTROL}; {attack}; echo end")
    assert CONTROL in r.output and "Read-only file system" in r.output, r.output
    assert (scripts / "lint.sh").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (scripts / "new.sh").exists()
    sbx.unconfined().run(attack)
    assert (scripts / "new.sh").exists()
