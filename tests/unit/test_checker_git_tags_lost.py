"""Tags keep no reflog: a command that deletes or moves one loses the only way back to its tag
object. Each line runs in a throwaway repository to show what it loses (or that it loses
nothing), and the pause list pauses exactly the ones that lose a tag."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from run_bash.checker import check

from .checker_util import GIT_ENV, clone_of_bare, git, runs


def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A clone whose remote has tag `v1`; locally `v1` is re-tagged (an annotated tag only the
    clone has) and `lonely` is a tag the remote lacks. Returns the two local tag objects."""
    _remote, p = clone_of_bare(tmp_path, git)
    git(p, "tag", "v1")
    git(p, "push", "-q", "-u", "origin", "main", "v1")
    git(p, "commit", "-q", "--allow-empty", "-m", "b")
    git(p, "tag", "-f", "-a", "-m", "local re-tag", "v1")
    git(p, "tag", "-a", "-m", "only here", "lonely")
    return p, [git(p, "rev-parse", "refs/tags/v1"), git(p, "rev-parse", "refs/tags/lonely")]


def lost(p: Path, objects: list[str]) -> bool:
    """No ref and no reflog (its old values included) reaches one of ``objects``."""
    unreachable = git(p, "fsck", "--unreachable", "--no-progress")
    return any(o in unreachable for o in objects)


LOSES = [
    "git update-ref refs/tags/lonely main",
    "git symbolic-ref refs/tags/lonely refs/heads/main",
    "git fetch --prune --prune-tags origin",
    "git fetch -p -P origin",
    "git -c fetch.pruneTags=true fetch --prune origin",
    "git -c remote.origin.pruneTags=true fetch -p origin",
    "git fetch --prune origin 'refs/tags/*:refs/tags/*'",
    "git fetch -f --tags origin",
    "git fetch -f origin tag v1",
    "git fetch origin +refs/tags/v1:refs/tags/v1",
    "git fetch -u origin '+refs/*:refs/*'",
    "git pull -q --force --tags origin main",
    "git -c fetch.pruneTags=true pull -q -p",
]
KEEPS = [
    "git fetch origin",
    "git fetch --prune origin",
    "git fetch --tags origin",
    "git fetch -f origin",
    "git fetch -P --no-prune origin",
    "git fetch origin tag v1",  # git refuses to clobber a tag without force
    "git fetch origin refs/tags/v1:refs/tags/v1",
    "git update-ref refs/heads/main main~1",  # a branch keeps its reflog
    "git update-ref --create-reflog refs/tags/lonely main",
    "git update-ref refs/tags/new main 0000000000000000000000000000000000000000",
    "git pull -q --tags origin main",
    "git pull -q --prune origin main",
]


@pytest.mark.parametrize("line", LOSES)
def test_a_line_that_loses_a_tag_pauses(tmp_path, line):
    p, tags = repo(tmp_path)
    subprocess.run(["bash", "-c", line], cwd=p, env=GIT_ENV, capture_output=True)
    assert lost(p, tags), f"{line!r} should lose a tag object (the test's premise)"
    v = check(line, strict=True)
    assert v.pause and v.effect == "irreversible", v


@pytest.mark.parametrize("line", KEEPS)
def test_a_line_that_keeps_every_tag_runs(tmp_path, line):
    p, tags = repo(tmp_path)
    subprocess.run(["bash", "-c", line], cwd=p, env=GIT_ENV, capture_output=True)
    assert not lost(p, tags), f"{line!r} should lose nothing (the test's premise)"
    assert runs(check(line, strict=True))
