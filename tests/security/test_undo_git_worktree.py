"""A git reason acts on the work tree git is told of: ``GIT_WORK_TREE``, ``--work-tree`` seen
from the ``-C`` directory, or the configuration of a repository named with ``--git-dir`` /
``GIT_DIR``. When that is outside the project (another directory the user lets runs write),
undo does not cover it and the gate asks. Through the host's service on each confining
backend; controls: the same reasons on the project's own work tree (``-C sub``, ``cd sub``) run
without asking, and undo takes them back byte-exact. (``GIT_WORK_TREE=.`` on the project asks
too: a line that sets a variable git reads may change what it ignores,
``test_undo_git_reads_first.py``.)"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.security.conftest import Host, selected_backends, tree

ELSEWHERE = [
    "GIT_WORK_TREE=$HOME/other git clean -fdq",
    "GIT_WORK_TREE=~/other git clean -fdq",
    "env GIT_WORK_TREE=$HOME/other git checkout -- .",
    "git -C $HOME/other --work-tree=. clean -fdq",
    "git --git-dir=$HOME/other/.git clean -fdq",
    "GIT_DIR=$HOME/other/.git git clean -fdq",
]


def _git(*args: str, cwd) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture(params=selected_backends())
def host(request, tmp_path):
    other = tmp_path / "home" / "other"
    h = Host(tmp_path, request.param, {"sandbox": {"rules": {"fs_writable": [".", str(other)]}}})
    other.mkdir()
    _git("init", "-q", cwd=other)
    _git("config", "core.worktree", str(other), cwd=other)
    (other / "precious.txt").write_text("untracked work\n")
    (h.p / "sub").mkdir()
    (h.p / "sub" / "scratch.txt").write_text("untracked in the project\n")
    try:
        yield h
    finally:
        h.close()


@pytest.mark.parametrize("line", ELSEWHERE)
def test_a_git_reason_on_a_work_tree_elsewhere_asks(host, line):
    host.run("true")  # the index
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert a["undo_why"], a
    r = host.run(line)  # held for the user: nothing ran
    assert r.get("status") == "awaiting_approval", r
    assert (host.world.home / "other" / "precious.txt").read_text() == "untracked work\n"


@pytest.mark.parametrize("line", ["git -C sub clean -fdq", "cd sub && git clean -fdq"])
def test_the_same_reason_on_the_project_runs_and_undo_takes_it_back(host, line):
    host.run("true")
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "sub" / "scratch.txt").exists()
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before
