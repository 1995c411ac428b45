"""A line that sets ``HOME`` makes its ``~`` (and a bare ``cd``) that value, not the user's home:
the gate must not read ``~/proj/objects`` as a path of the project that does not exist (nothing
to lose) when the line's own ``HOME`` plus a symlink already in the project makes it
``.git/objects``. Through the host's service on each confining backend; controls: ``~`` with
HOME left alone, and a line that sets HOME but names no ``~``, run without asking and undo
takes them back byte-exact."""

from __future__ import annotations

import os

import pytest

from tests.security.conftest import Host, tree

SETS_HOME = [
    "HOME=$PWD/src; rm -rf ~/proj/objects",
    "export HOME=$PWD/src; rm -rf ~/proj/objects",
    "cd src && HOME=$(pwd) && rm -rf ~/proj/objects",
    "HOME=$PWD/src; cd; rm -rf proj/objects",
    "HOME=$PWD/src bash -c 'rm -rf ~/proj/objects'",
]


def _project(h: Host) -> None:
    (h.p / "src").mkdir()
    (h.p / "src" / "a.txt").write_text("a\n")
    os.symlink("../.git", h.p / "src" / "proj")  # made by an earlier run, say
    h.run("true")


@pytest.mark.parametrize("line", SETS_HOME)
def test_a_tilde_after_the_line_sets_home_asks(host, line):
    _project(host)
    git_before = tree(host.p / ".git")
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    r = host.run(line)
    assert r.get("status") == "awaiting_approval", r
    assert tree(host.p / ".git") == git_before


@pytest.mark.parametrize("line", ["rm -rf ~/proj/src", "HOME=/nowhere; rm -rf src"])
def test_with_home_left_alone_or_unused_it_runs_and_undo_takes_it_back(host, line):
    _project(host)
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert not (host.p / "src").exists()
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before
