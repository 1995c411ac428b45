"""The refs' signature sees every way a ref changes (and not the index's churn), and the judging of
new commits: against the first parent only, replace refs judged, too many commits not judged."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from run_bash.sandbox import reftips

ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_AUTHOR_NAME": "u",
    "GIT_AUTHOR_EMAIL": "u@x",
    "GIT_COMMITTER_NAME": "u",
    "GIT_COMMITTER_EMAIL": "u@x",
}


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=ENV, input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "r"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    (r / "README").write_text("hi\n")
    git(r, "add", "README")
    git(r, "commit", "-qm", "init")
    git(r, "branch", "side")
    return r


def sig(repo: Path) -> reftips.Sig:
    g = str(repo / ".git")
    return reftips.signature(g, g)


def test_a_signature_that_saw_a_change_time_just_now_is_equal_to_none(repo):
    assert sig(repo) != sig(repo)  # `git branch side` just now: a write in the same tick hides


def test_the_signature_sees_each_change_of_a_ref_and_not_the_index(repo, monkeypatch):
    monkeypatch.setattr(reftips, "SETTLED_NS", 0)
    before = sig(repo)
    git(repo, "status", "--porcelain")
    (repo / "README").touch()
    git(repo, "add", "README")
    assert sig(repo) == before  # the index changed, not a ref
    head = git(repo, "rev-parse", "HEAD")
    other = git(repo, "commit-tree", git(repo, "write-tree"), "-p", head, "-m", "x")
    # In place, same size: only the file's times say so.
    ref = repo / ".git/refs/heads/side"
    time.sleep(0.05)  # past the timestamp tick of its last write (see the test above)
    with open(ref, "r+") as f:
        f.write(other + "\n")
    after = sig(repo)
    assert after != before
    git(repo, "pack-refs", "--all")
    assert sig(repo) != after
    packed = sig(repo)
    git(repo, "update-ref", "ORIG_HEAD", head)
    assert sig(repo) != packed
    pseudo = sig(repo)
    git(repo, "stash", "list")
    assert sig(repo) == pseudo


def tips(repo: Path) -> reftips.Tips:
    g = str(repo / ".git")
    return reftips.ask(g, reftips.signature(g, g))


def judge(repo: Path, known: reftips.Tips) -> reftips.Verdict:
    g = str(repo / ".git")
    kept = {str(repo / ".envrc")}
    return reftips.judge(g, known, tips(repo), str(repo), kept.__contains__)


def commit_envrc(repo: Path, parent: str, text: str = "echo pwned\n") -> str:
    blob = git(repo, "hash-object", "-w", "--stdin", stdin=text)
    base = git(repo, "ls-tree", parent)
    tree = git(repo, "mktree", stdin=f"{base}\n100644 blob {blob}\t.envrc\n")
    return git(repo, "commit-tree", tree, "-p", parent, "-m", "env")


def test_a_merge_is_judged_against_its_first_parent(repo):
    # The user's own committed .envrc, then gone from the work tree.
    user = commit_envrc(repo, git(repo, "rev-parse", "HEAD"))
    git(repo, "update-ref", "refs/heads/main", user)
    known = tips(repo)
    side = git(repo, "rev-parse", "side")
    merge = git(repo, "commit-tree", f"{user}^{{tree}}", "-p", user, "-p", side, "-m", "merge")
    git(repo, "update-ref", "refs/heads/main", merge)
    v = judge(repo, known)
    assert not v.found and not v.refs, v  # against `side` it adds .envrc: that is not the run's
    evil = commit_envrc(repo, side, "echo other\n")
    git(repo, "update-ref", "refs/heads/side", evil)
    v = judge(repo, known)
    assert set(v.refs) == {"refs/heads/side"} and v.refs["refs/heads/side"].path == ".envrc"


def test_a_replace_ref_is_judged_not_followed(repo):
    known = tips(repo)
    head = git(repo, "rev-parse", "HEAD")
    evil = commit_envrc(repo, head)
    git(repo, "replace", head, evil)
    assert git(repo, "ls-tree", "--name-only", "HEAD").split() == [".envrc", "README"]
    v = judge(repo, known)
    assert list(v.refs) == [f"refs/replace/{head}"], v


def test_the_users_own_content_in_the_work_tree_is_theirs(repo):
    known = tips(repo)
    (repo / ".envrc").write_text("echo mine\n")
    git(repo, "update-ref", "refs/heads/side", commit_envrc(repo, "side", "echo mine\n"))
    assert not judge(repo, known).refs
    (repo / ".envrc").chmod(0o755)  # not as the commit has it: its mode differs
    assert judge(repo, known).refs


def test_too_many_commits_are_not_judged(repo, monkeypatch):
    known = tips(repo)
    c = git(repo, "rev-parse", "HEAD")
    for i in range(3):
        c = git(repo, "commit-tree", f"{c}^{{tree}}", "-p", c, "-m", str(i))
    git(repo, "update-ref", "refs/heads/side", c)
    monkeypatch.setattr(reftips, "MAX_COMMITS", 2)
    v = judge(repo, known)
    assert v.why_all is not None
    done, failed = reftips.take_back(str(repo / ".git"), str(repo), known, tips(repo), v)
    assert not failed and git(repo, "rev-parse", "side") == git(repo, "rev-parse", "main"), done
