"""The index kept from before a run (``sandbox/indexbefore.py``) and the putting back of what it
staged (``gitindex.put_back``), asked of a real git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from run_bash.sandbox import gitindex, indexbefore


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, input=stdin, capture_output=True, text=True, check=True
    ).stdout


def blob(repo: Path, text: str) -> str:
    return git(repo, "hash-object", "-w", "--stdin", stdin=text).strip()


def test_no_index_staged_nothing_and_a_fifo_is_not_kept(tmp_path):
    git(tmp_path, "init", "-q")
    g = str(tmp_path / ".git")
    held = indexbefore.hold([g])
    assert indexbefore.staged(g, held[gitindex.index_path(g)], ["a"]) == {}
    os.mkfifo(gitindex.index_path(g))
    assert indexbefore.hold([g]) == {}  # never a wait on it
    assert indexbefore.staged(g, None, ["a"]) is None


def test_a_conflict_staged_before_the_run_is_put_back_whole(tmp_path):
    git(tmp_path, "init", "-q")
    g = str(tmp_path / ".git")
    ours, theirs, run = (blob(tmp_path, t) for t in ("ours\n", "theirs\n", "run\n"))
    git(
        tmp_path,
        "update-index",
        "--index-info",
        stdin=f"100644 {ours} 2\tf\n100644 {theirs} 3\tf\n",
    )
    listed = git(tmp_path, "ls-files", "--stage")
    held = indexbefore.hold([g])[gitindex.index_path(g)]
    git(tmp_path, "update-index", "--index-info", stdin=f"0 {'0' * 40}\tf\n100644 {run} 0\tf\n")
    git(tmp_path, "update-index", "--add", "--cacheinfo", f"100644,{run},new")
    found = [
        gitindex.Found("f", "100644", run, "0", "kept"),
        gitindex.Found("new", "100644", run, "0", "kept"),
    ]
    before = indexbefore.staged(g, held, ["f", "new"])
    assert before == {"f": [("100644", ours, "2"), ("100644", theirs, "3")]}
    assert gitindex.put_back(g, gitindex.index_path(g), str(tmp_path), before, found) is None
    assert git(tmp_path, "ls-files", "--stage") == listed  # "new" was not there: left out


def test_an_index_over_the_limit_is_not_kept(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a\n")
    git(tmp_path, "add", "a")
    monkeypatch.setattr(indexbefore, "MAX_COPY", 10)
    assert indexbefore.hold([str(tmp_path / ".git")]) == {}
