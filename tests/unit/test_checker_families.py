"""Command families a user expects to be judged: each member pauses with its rule and effect
class, and its harmless near-twins run."""

from __future__ import annotations

import pytest

from run_bash.checker import check

P = pytest.param

# (command, rule, effect)
PAUSES: list[tuple[str, str, str]] = [
    # git: refs without a reflog, objects dropped for good, commands run in each submodule
    ("git tag -d v1", "git", "irreversible"),
    ("git tag --delete v1 v2", "git", "irreversible"),
    ("git tag -f v1", "git", "irreversible"),
    ("git tag -fa v1 -m x", "git", "irreversible"),
    ("git -C repo tag --force v1 HEAD~1", "git", "irreversible"),
    ("git tag -l | xargs git tag -d", "git", "irreversible"),
    ("git replace -d abc", "git", "irreversible"),
    ("git replace -f abc def", "git", "irreversible"),
    ("git repack -ad", "git", "irreversible"),
    ("git repack -a -d -f", "git", "irreversible"),
    ("git lfs prune", "git", "irreversible"),
    ("git submodule foreach --recursive git clean -fdx", "git", "irreversible"),
    ("git submodule --quiet foreach -- git push -f", "git", "irreversible"),
    ("git submodule foreach git reset --hard HEAD~1", "git", "irreversible"),
]

RUNS: list[str] = [
    "git tag v1",
    "git tag -a v1 -m x",
    "git tag -l",
    "git tag -n5",
    "git tag --sort=-v:refname",
    "git tag -e v1",
    "git replace -l",
    "git replace abc def",
    "git repack",
    "git repack -d",
    "git repack -Ad",
    "git lfs pull",
    "git lfs ls-files",
    "git branch -M main",
    "git branch -m old new",
    "git branch -f",
    "git branch -f main abc",  # the branch's reflog keeps where it was
    "git submodule foreach git status",
    "git submodule foreach --recursive 'echo $name'",
    "git submodule foreach --recursive git pull",
]


@pytest.mark.parametrize("cmd, rule, effect", [P(*c, id=c[0]) for c in PAUSES])
def test_a_family_member_pauses(cmd: str, rule: str, effect: str) -> None:
    verdict = check(cmd, strict=True)
    assert verdict.pause, (cmd, verdict)
    assert verdict.rule == rule, (cmd, verdict)
    assert verdict.effect == effect, (cmd, verdict)


@pytest.mark.parametrize("cmd", RUNS)
def test_a_harmless_near_twin_runs(cmd: str) -> None:
    verdict = check(cmd, strict=True)
    assert not verdict.pause, (cmd, verdict)
