"""A run cannot hide a new repository behind the limits of the checks after it.

* **Too many directories.** The usual walk of a tree stops at ``MAX_SCAN_DIRS`` directories. A
  run that grows the project past it, with its repository where a depth-first walk comes last
  (``ls -U`` shows the order), is still checked whole (``TreeScan.walk_on``): the repository,
  recorded as a gitlink in the index so the user's plain ``git status`` enters it, goes to the
  quarantine with its ``core.fsmonitor``.
  A link it leaves there that leads where it could not go is judged as any other.
* **Too many nested git dirs.** Hundreds of empty ``.git/worktrees/*`` do not hide a submodule
  git dir planted in ``.git/modules`` from the check (``nested_git_dirs(limit=None)``): the user's
  ``git submodule update --init`` would take it up.

Each has the same command through ``none`` beside it: the payload does fire there.
"""

from __future__ import annotations

import shutil

import pytest

from tests.security.conftest import CONTROL, Runner, World
from tests.security.test_hostread import add_submodule, fsmonitor_cfg, git, pwned

BACKENDS = ["bubblewrap", "sandlock", "none"]

# The walk's limit, lowered for these tests (the guard runs in this process): the same check
# past it, without making 100,000 directories per run on a machine the rest of the suite shares.
LIMIT = 3000
# Over LIMIT directories, in the sibling the walk takes first.
FLOOD = (
    "mkdir -p p/a p/b && first=$(ls -U p | head -1) && "
    "other=$([ $first = a ] && echo b || echo a) && "
    "for i in $(seq 0 63); do mkdir -p p/$other/$i/{0..63}; done"
)


@pytest.fixture(autouse=True)
def _lower_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from run_bash.sandbox import treescan

    monkeypatch.setattr(treescan, "MAX_SCAN_DIRS", LIMIT)


def _clear(world: World) -> None:
    for f in world.home.glob("PWNED*"):
        f.unlink()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repository_past_the_walk_limit_is_checked(world: World, backend: str) -> None:
    r = Runner(backend, world)
    try:
        res = r.run(
            f"echo {CONTROL}; {FLOOD} && git init -q p/$first/evil && "
            "git -C p/$first/evil commit -q --allow-empty -m e && "
            f"{fsmonitor_cfg(world, 'flood')} >> p/$first/evil/.git/config && "
            "git add p/$first/evil 2>/dev/null; echo end",
            timeout=180,
        )
    finally:
        r.close()
    assert CONTROL in res.output and "end" in res.output, res.output
    _clear(world)
    git(world, "status")
    if backend == "none":
        assert pwned(world), "control: the payload does not fire even unconfined"
    else:
        assert pwned(world) == [], res.notices
        assert any("evil" in n and "not inert" in n for n in res.notices), res.notices


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_link_out_past_the_walk_limit_is_judged(world: World, backend: str) -> None:
    """A link to a file the run could not read, left where the usual walk does not reach:
    whoever follows it later (CodeCompanion's file tools, the editor) would read the secret."""
    r = Runner(backend, world)
    try:
        res = r.run(
            f"echo {CONTROL}; {FLOOD} && mkdir -p p/$first/docs && "
            "ln -s ~/.ssh/id_rsa p/$first/docs/notes.md && echo p/$first/docs/notes.md > where; "
            "echo end",
            timeout=180,
        )
    finally:
        r.close()
    assert CONTROL in res.output and "end" in res.output, res.output
    link = world.project / (world.project / "where").read_text().strip()
    if backend == "none":
        assert link.is_symlink()  # control: the command made it
    else:
        assert not link.is_symlink(), res.notices
        assert any("notes.md" in n and "symbolic link" in n for n in res.notices), res.notices


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_git_dir_behind_many_worktree_dirs_is_checked(world: World, backend: str) -> None:
    add_submodule(world)
    git(world, "submodule", "deinit", "-q", "-f", "mods/sm", check=True)
    shutil.rmtree(world.project / ".git/modules/mods/sm")
    sm = ".git/modules/mods/sm"
    r = Runner(backend, world)
    try:
        res = r.run(
            f"echo {CONTROL}; mkdir -p .git/worktrees && "
            "for i in $(seq 1 600); do mkdir .git/worktrees/w$i; done && "
            f"git init -q --bare {sm} && git -C {sm} config core.bare false && "
            f"git -C {sm} config core.worktree ../../../../mods/sm && "
            f"git -C {sm} config core.fsmonitor 'touch {world.home}/PWNED-module; false'; "
            "echo end",
            timeout=120,
        )
    finally:
        r.close()
    assert CONTROL in res.output and "end" in res.output, res.output
    _clear(world)
    git(world, "-c", "protocol.file.allow=always", "submodule", "update", "-q", "--init")
    git(world, "status")
    if backend == "none":
        assert pwned(world), "control: the planted module git dir was not taken up"
    else:
        assert pwned(world) == [], [n for n in res.notices if "mods/sm" in n]
        assert any("mods/sm" in n for n in res.notices)
