"""The gate asks git whether a forced rename or copy of a branch replaces one: `git branch -M
main` right after `git init` (no branch `main` yet) runs without asking, and the same line over
an existing `main` asks, since that branch and its reflog are then gone for good. The checker
cannot tell the two apart (it reads only the text); git, asked before the line runs, can, as
long as nothing in the line can make the branch first."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from run_bash.service import Service

from .checker_util import GIT_ENV, git

REASON = "renames a branch over any existing branch of the new name"


def run(cwd: Path, line: str) -> None:
    subprocess.run(["bash", "-c", line], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def fresh(tmp_path: Path) -> Path:
    """A repository on `master` with one commit, and no branch `main`."""
    p = tmp_path / "r"
    p.mkdir(parents=True)
    git(p, "init", "-q", "-b", "master")
    git(p, "commit", "-q", "--allow-empty", "-m", "a")
    return p


def with_main(tmp_path: Path) -> tuple[Path, str]:
    """A repository on `other`, with a branch `main` whose commit only `main` holds."""
    p = fresh(tmp_path)
    git(p, "checkout", "-q", "-b", "other")
    c = git(p, "commit-tree", "-p", "master", "-m", "only-on-main", "master^{tree}")
    git(p, "update-ref", "refs/heads/main", c)
    return p, c


def reachable(p: Path, sha: str) -> bool:
    refs = git(p, "for-each-ref", "--format=%(objectname)")
    reflogs = git(p, "reflog", "show", "--all", "--format=%H")
    return sha in refs or sha in reflogs


@pytest.fixture
def svc(clean_svc):
    return clean_svc


def asks(svc: Service, line: str, cwd: Path) -> dict[str, object]:
    return svc.check(line, {"cwd": str(cwd)})


@pytest.mark.parametrize(
    "line", ["git branch -M main", "git branch -M master main", "git branch -c --force main"]
)
async def test_no_branch_of_the_new_name_runs_without_asking(svc, tmp_path, line):
    p = fresh(tmp_path)
    answer = asks(svc, line, p)
    assert not answer["pause"], answer
    assert answer["hits"] == []
    run(p, line)
    assert git(p, "rev-parse", "--verify", "-q", "refs/heads/main")


@pytest.mark.parametrize("line", ["git branch -M main", "git branch -M master main"])
async def test_an_existing_branch_of_the_new_name_asks_and_would_be_lost(svc, tmp_path, line):
    p, c = with_main(tmp_path)
    if "master" in line:
        git(p, "checkout", "-q", "master")
    answer = asks(svc, line, p)
    assert answer["pause"] and answer["effect"] == "irreversible", answer
    assert REASON in str(answer["reason"])
    assert reachable(p, c)
    run(p, line)
    assert not reachable(p, c)  # the branch and its reflog are gone: the reason was right


async def test_the_current_branch_renamed_onto_itself_runs(svc, tmp_path):
    p = fresh(tmp_path)
    git(p, "branch", "-m", "main")
    answer = asks(svc, "git branch -M main", p)
    assert not answer["pause"], answer


async def test_the_repository_is_the_one_minus_C_names(svc, tmp_path):
    p = fresh(tmp_path)
    assert not asks(svc, "git -C r branch -M main", tmp_path)["pause"]
    assert not asks(svc, "cd r && git branch -M main", tmp_path)["pause"]
    git(p, "branch", "main")
    assert asks(svc, "git -C r branch -M main", tmp_path)["pause"]
    assert asks(svc, "cd r && git branch -M main", tmp_path)["pause"]


@pytest.mark.parametrize(
    "line",
    [
        # Another git command of the line may make the branch first.
        "git branch main; git branch -M main",
        "git commit -q --allow-empty -m b && git branch -M main",
        # Git may read another repository, or other refs, than the one asked.
        "GIT_DIR=elsewhere/.git git branch -M main",
        "git --git-dir=elsewhere/.git branch -M main",
        "git --namespace=n branch -M main",
    ],
)
async def test_a_line_that_may_change_what_git_reads_asks(svc, tmp_path, line):
    p = fresh(tmp_path)
    answer = asks(svc, line, p)
    assert answer["pause"], answer
    assert any(REASON in str(h["reason"]) for h in answer["hits"])


async def test_the_line_runs_the_branch_in_before_it_renames_over_it(svc, tmp_path):
    """The same-line case the state check must not miss: git says no `main` before the line,
    and the line's first command makes one, which the rename then destroys."""
    p = fresh(tmp_path)
    line = "git branch main HEAD && git branch -M main"
    assert asks(svc, line, p)["pause"]


async def test_a_variable_naming_another_repository_keeps_the_reason(tmp_path):
    p = fresh(tmp_path)
    other = fresh(tmp_path / "o")
    git(other, "branch", "main")
    service = Service(
        asyncio.get_running_loop(),
        lambda _n, _p: None,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_DIR": str(other / ".git")},
        state_dir=str(tmp_path / "state"),
    )
    service.setup({"sandbox": {"backend": "none"}})
    try:
        assert service.check("git branch -M main", {"cwd": str(p)})["pause"]
    finally:
        await service.mgr.shutdown()


async def test_other_reasons_of_the_line_stay(svc, tmp_path):
    p = fresh(tmp_path)
    answer = asks(svc, "git branch -M main && kill 1", p)
    assert answer["pause"] and answer["effect"] == "irreversible"
    assert [h["rule"] for h in answer["hits"]] == ["kill"]
    assert str(answer["reason"]).startswith("`kill 1`")


async def test_not_a_repository_keeps_the_reason(svc, tmp_path):
    assert asks(svc, "git branch -M main", tmp_path)["pause"]


async def test_another_run_in_the_repository_keeps_the_reason(svc, tmp_path):
    """A run still going in the repository may make the branch before this line runs."""
    p = fresh(tmp_path)
    (p / "sub").mkdir()
    assert not asks(svc, "git branch -M main", p)["pause"]
    s = svc.run({"cmd": "sleep 30", "cwd": str(p / "sub"), "unsandboxed_ok": True})
    try:
        assert asks(svc, "git branch -M main", p)["pause"]
    finally:
        svc.kill(s["id"])
