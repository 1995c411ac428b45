"""Reasons whose effect follows symlinks under their targets (``find -L``/``-H``/``-follow``,
``truncate``/``shred`` of a glob's names, ``rm -r`` of a glob with more after it or a final
``/``) act where a symlink points: the approval gate must not let them run without asking when
a symlink is there. Through the host's service (gate, run, undo) on each confining backend,
with controls: the same lines with no symlink, and ``rm -rf src/*`` / ``find src -delete``
beside the symlinks (which they never follow), run without asking and undo byte-exact."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security.conftest import tree

FOLLOWING = [
    "rm -rf src/*/",
    "rm -rf src/*/heads",
    "truncate -s0 src/*",
    "shred -n1 src/*.txt",
    "find -L src -name main -delete",
    "find src -follow -name main -delete",
    "find -H src/* -name main -delete",
]


def _src(p: Path, links: bool) -> None:
    (p / "src").mkdir()
    (p / "src" / "a.txt").write_text("a\n")
    (p / "src" / "d").mkdir()
    (p / "src" / "d" / "heads").mkdir()
    (p / "src" / "d" / "heads" / "main").write_text("mine\n")
    if links:
        os.symlink("../.git/refs", p / "src" / "lnk")
        os.symlink("../.git/HEAD", p / "src" / "lf.txt")


def test_an_effect_that_follows_a_symlink_asks(host):
    _src(host.p, links=True)
    host.run("true")  # the index
    git_before = tree(host.p / ".git")
    for line in FOLLOWING:
        a = host.check(line)
        assert a["needs_approval"] is True and a["effect"] == "reversible", (line, a)
        assert "is a symlink" in a["undo_why"], (line, a)
    assert tree(host.p / ".git") == git_before
    # Controls beside the same symlinks: these never follow one (rm and find remove the link).
    for line in ("rm -rf src/*", "find src -name main -delete"):
        a = host.check(line)
        assert a["needs_approval"] is False and a["undoable"] is True, (line, a)
    before = tree(host.p)
    r = host.run("rm -rf src/*")
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "src" / "a.txt").exists() and tree(host.p / ".git") == git_before
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


@pytest.mark.parametrize("line", FOLLOWING)
def test_with_no_symlink_the_same_line_runs_and_undo_takes_it_back(host, line):
    _src(host.p, links=False)
    host.run("true")
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert tree(host.p) != before, r
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


def test_while_another_run_of_the_project_runs_an_effect_that_follows_asks(host):
    """A run still going in the project (a background session) may make a symlink under what
    the effect follows after undo looked: such an effect asks while it runs (as does one that
    follows none, for what that run writes after undo looked), and once it ended the same line
    is covered."""
    _src(host.p, links=False)
    host.run("true")
    line = "rm -rf src/*/"
    assert host.check(line)["needs_approval"] is False  # the control: nothing else runs
    started = host.svc.run({"cmd": "sleep 120", "cwd": str(host.p), "bg_after": 0.1})
    sid = started["id"]
    host.drive(lambda: any(n == "result" and p.get("id") == sid for n, p in host.events))
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert f"session {sid} still runs in this project" in a["undo_why"], a
    plain = host.check("rm -rf src/*")  # follows nothing
    assert plain["needs_approval"] is True and "what it writes after" in plain["undo_why"], plain
    host.svc.kill(sid)
    host.drive(lambda: host.event("exited", "id", sid) is not None)
    assert host.check(line)["needs_approval"] is False
