"""Git's own reasons go without asking beside an ignored tree undo does not keep only when git
tracks no file in it: not in the index, and not in the commit the reason writes files from.
``git reset --hard`` writes what ``HEAD`` has (a file taken out of the index with ``git rm
--cached`` and ignored since), ``git checkout REV -- .`` and ``git restore --source=REV .`` what
``REV`` has: each overwrote the ignored file's unkept content without a question. Through the
host's service on each confining backend; control: the same lines where no commit tracks the
tree run without asking, and undo takes them back byte-exact."""

from __future__ import annotations

import subprocess

import pytest

from tests.security.conftest import Host, tree

HOST_CONFIG = {"undo": {"ignored_total": 1000}}
PRECIOUS = "work of yours, in no commit\n"
FROM_HEAD = ["git reset --hard"]
FROM_COMMIT = [
    "git checkout HEAD~1 -- .",
    "git checkout HEAD~1 .",
    "git restore --source=HEAD~1 .",
    "git restore -s HEAD~1 -- .",
]


def _git(h: Host, *args: str) -> None:
    env = {**h.world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=h.p, env=env, check=True, capture_output=True)


def _project(h: Host, tracked: bool, committed: bool) -> None:
    """``big/`` is ignored and over undo's budget. ``tracked``: a commit holds ``big/data.txt``
    (``HEAD`` when not ``committed``, else ``HEAD~1``); never the index."""
    big = h.p / "big"
    big.mkdir()
    (big / "data.txt").write_text("as committed\n")
    _git(h, "add", "big/data.txt" if tracked else "README")
    (h.p / "README").write_text("hello again\n")
    _git(h, "commit", "-qam", "one")
    if tracked:
        _git(h, "rm", "-q", "--cached", "big/data.txt")
    (h.p / ".gitignore").write_text("big/\n")
    _git(h, "add", ".gitignore")
    if committed:
        _git(h, "commit", "-qm", "two")
    (big / "data.txt").write_text(PRECIOUS)
    (big / "pad").write_bytes(b"x" * 4000)
    (h.p / "README").write_text("edited, not committed\n")
    h.run("true")


@pytest.mark.parametrize(
    "line, committed",
    [(line, False) for line in FROM_HEAD] + [(line, True) for line in FROM_COMMIT],
)
def test_a_commit_that_tracks_the_unkept_tree_asks(host, line, committed):
    _project(host, tracked=True, committed=committed)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert (host.p / "big" / "data.txt").read_text() == PRECIOUS


@pytest.mark.parametrize(
    "line, committed",
    [(line, False) for line in FROM_HEAD] + [(line, True) for line in FROM_COMMIT],
)
def test_where_no_commit_tracks_it_it_runs_and_undo_takes_it_back(host, line, committed):
    _project(host, tracked=False, committed=committed)
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert (host.p / "README").read_text() != "edited, not committed\n"
    assert (host.p / "big" / "data.txt").read_text() == PRECIOUS
    done = host.undo(r["id"])
    assert not done["errors"], done
    after = tree(host.p)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert {k for k in changed if not k.startswith(".git/")} == set(), changed
