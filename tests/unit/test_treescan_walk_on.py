"""The check after a run that made its tree too large for the usual walk (``TreeScan.walk_on``)
and the uncapped listing of nested git dirs (``nested_git_dirs(limit=None)``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from run_bash.sandbox.treescan import MAX_GIT_DIRS, TreeScan, nested_git_dirs


def _repo(path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(path)], check=True)


def test_walk_on_finds_a_repository_past_the_usual_walk(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "src").mkdir(parents=True)
    scan = TreeScan()
    assert scan.find(str(root)) == ([], False)
    old = scan.known()
    for i in range(50):
        (root / "flood" / str(i)).mkdir(parents=True)
    _repo(root / "late" / "evil")
    (root / "src" / "mine").symlink_to("/etc/hostname")  # in a directory walked before
    (root / "late" / "out").symlink_to("/etc/passwd")  # in a new one
    found, left, links = scan.walk_on(str(root), frozenset(), old, limit=10_000)
    assert (str(root / "late" / "evil" / ".git"), "dotgit") in found
    assert left == []
    assert sorted(links) == [
        (str(root / "late" / "out"), "/etc/passwd"),
        (str(root / "src" / "mine"), "/etc/hostname"),
    ]
    # A link the usual walk listed already is not given again.
    scan.find(str(root / "src"))
    assert (str(root / "src" / "mine"), "/etc/hostname") not in scan.walk_on(
        str(root), frozenset(), scan.known(), limit=10_000
    )[2]


def test_walk_on_walks_what_was_there_first_and_names_the_new_tops_it_left(
    tmp_path: Path,
) -> None:
    root = tmp_path / "p"
    (root / "src" / "deep").mkdir(parents=True)
    _repo(root / "src" / "deep" / "mine")  # the user's own, there before
    scan = TreeScan()
    scan.find(str(root))
    old = scan.known()
    for i in range(30):
        (root / "new" / str(i) / "x").mkdir(parents=True)
    (root / "src" / "made" / "a").mkdir(parents=True)
    found, left, _links = scan.walk_on(str(root), frozenset(), old, limit=8)
    # Everything there before was walked (its repository found) within the limit.
    assert (str(root / "src" / "deep" / "mine" / ".git"), "dotgit") in found
    # What is left is new only, each branch by its topmost new directory.
    assert left, "the limit leaves part of the new tree unwalked"
    for top in left:
        assert top not in old
        assert Path(top).parent.as_posix() in old | {str(root)}
    assert all(not str(root / "src" / "deep").startswith(t) for t in left)
    # A positive control: with room enough, nothing is left.
    assert scan.walk_on(str(root), frozenset(), old, limit=10_000)[1] == []


def test_nested_git_dirs_uncapped_reaches_modules_behind_many_worktrees(tmp_path: Path) -> None:
    common = tmp_path / "g"
    for i in range(MAX_GIT_DIRS + 20):
        (common / "worktrees" / f"w{i}").mkdir(parents=True)
    module = common / "modules" / "sm"
    subprocess.run(["git", "init", "-q", "--bare", str(module)], check=True)
    capped = nested_git_dirs(str(common))
    assert len(capped) == MAX_GIT_DIRS and str(module) not in capped
    every = nested_git_dirs(str(common), limit=None)
    assert str(module) in every and len(every) == MAX_GIT_DIRS + 21
