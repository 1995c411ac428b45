"""A second name made for a project file after undo's index was built, from outside the project
(``ln src/a ~/backup/a``), tells no watch of the project: the kernel reports a link count only
to a watch on the file itself. A write in place (``truncate``, ``shred``) through the project's
name would change the outside name too, out of undo's reach: the gate asks the link count
afresh, so the line asks. Through the host's service on each confining backend; controls: the
same line on a file with one name runs without asking and undo takes it back byte-exact."""

from __future__ import annotations

import os
import time

import pytest

from tests.security.conftest import Host, tree

RACY_S = 2.5  # older than the index's racy window: the index trusts the file's entry


def _project(h: Host) -> None:
    (h.p / "src").mkdir()
    (h.p / "src" / "notes.txt").write_text("precious\n")
    (h.p / "src" / "alone.txt").write_text("one name\n")
    time.sleep(RACY_S)
    h.run("true")  # the index, with each file's one name


@pytest.mark.parametrize("line", ["truncate -s 0 src/notes.txt", "shred -n1 src/*.txt"])
def test_a_name_made_outside_after_the_index_asks(host, line):
    _project(host)
    outside = host.world.home / "backup-notes.txt"
    os.link(host.p / "src" / "notes.txt", outside)
    a = host.check(line)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert "src/notes.txt has more than one name" in a["undo_why"], a
    r = host.run(line)  # checked again on the run's own snapshot: held for the user
    assert r.get("status") == "awaiting_approval", r
    assert outside.read_text() == "precious\n"


def test_a_file_with_one_name_runs_without_asking_and_undo_takes_it_back(host):
    _project(host)
    line = "truncate -s 0 src/alone.txt"
    a = host.check(line)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(line)
    assert any("ran without asking" in n for n in r["notices"]), r
    assert (host.p / "src" / "alone.txt").read_text() == ""
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


@pytest.mark.parametrize("outside_write", [True, False])
def test_a_write_through_a_name_outside_is_what_undo_gives_back(host, tmp_path, outside_write):
    """The content a run changes is what was there when it started, also when it was written
    through a name outside the project (no watch of the project hears of that): undo gives back
    that content, not the one the index read before. Control: with no such write, the same."""
    outside = host.world.home / "backup-notes.txt"
    (host.p / "src").mkdir()
    (host.p / "src" / "notes.txt").write_text("first\n")
    os.link(host.p / "src" / "notes.txt", outside)
    time.sleep(RACY_S)
    host.run("true")  # the index: "first"
    time.sleep(RACY_S)  # and the store's own check of it, done once the project is quiet
    want = "first\n"
    if outside_write:
        with open(outside, "r+") as f:  # in place, through the other name
            f.write("mine!\n")
        want = "mine!\n"
        time.sleep(RACY_S)
    r = host.run("echo by-the-run > src/notes.txt")
    assert r["changes"]["paths"] == ["M src/notes.txt"], r
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert (host.p / "src" / "notes.txt").read_text() == want
