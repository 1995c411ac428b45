"""A reversible reason goes without asking only while no other run can write its project: what a
background session writes after undo looked (the run's start) is in no snapshot, so ``rm -rf
src`` deleted a file it had just made, undo gave ``src`` back without it and said nothing.
Through the host's service on each confining backend: a session in the project, and one in a
directory that holds the project (a nested repository), make the line ask; controls: once the
session ended the same line runs without asking and undo takes it back byte-exact; and what the
question is for: the line, approved, deletes what the session wrote after its start, which undo
cannot give back."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.security.conftest import Host, tree

LINE = "rm -rf src"


def _src(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src" / "a.txt").write_text("a\n")


def _background(h: Host, cmd: str, cwd: Path) -> str:
    started = h.svc.run({"cmd": cmd, "cwd": str(cwd), "bg_after": 0.1})
    sid = started["id"]
    h.drive(lambda: any(n == "result" and p.get("id") == sid for n, p in h.events))
    return sid


def _end(h: Host, sid: str) -> None:
    h.svc.kill(sid)
    h.drive(lambda: h.event("exited", "id", sid) is not None)


def test_while_a_background_session_can_write_the_project_a_reversible_reason_asks(host):
    _src(host.p)
    host.run("true")
    assert host.check(LINE)["needs_approval"] is False  # the control: nothing else runs
    sid = _background(host, "sleep 120", host.p)
    a = host.check(LINE)
    assert a["needs_approval"] is True and a["effect"] == "reversible", a
    assert f"session {sid} still runs in this project" in a["undo_why"], a
    r = host.run(LINE)
    assert r.get("status") == "awaiting_approval", r
    assert (host.p / "src" / "a.txt").exists()
    _end(host, sid)
    a = host.check(LINE)
    assert a["needs_approval"] is False and a["undoable"] is True, a
    before = tree(host.p)
    r = host.run(LINE)
    assert any("ran without asking" in n for n in r["notices"]), r
    done = host.undo(r["id"])
    assert not done["errors"] and not done["not_recovered"], done
    assert tree(host.p) == before


def test_a_session_in_a_directory_that_holds_the_project_counts(host):
    inner = host.p / "inner"
    inner.mkdir()
    subprocess.run(["git", "init", "-q", str(inner)], check=True, env=host.world.env)
    _src(inner)
    first = host.svc.run({"cmd": "true", "cwd": str(inner)})["id"]
    host.drive(lambda: host.event("result", "id", first) is not None)
    a = host.svc.check(LINE, {"cwd": str(inner)})
    assert a["needs_approval"] is False, a  # the control: nothing else runs
    sid = _background(host, "sleep 120", host.p)
    a = host.svc.check(LINE, {"cwd": str(inner)})
    assert a["needs_approval"] is True, a
    assert f"session {sid} still runs in this project" in a["undo_why"], a
    _end(host, sid)


def test_what_the_session_wrote_after_the_start_is_what_undo_cannot_give_back(host):
    """Why it asks: the line, approved, deletes the file the session wrote after the line's
    start, and undo restores ``src`` as it was at the start, without it."""
    _src(host.p)
    host.run("true")
    sid = _background(
        host, "until [ -e go ]; do sleep 0.02; done; echo late > src/late.txt; touch done", host.p
    )
    line = f"touch go; until [ -e done ]; do sleep 0.02; done; {LINE}"
    started = host.svc.run({"cmd": line, "cwd": str(host.p)})
    assert started.get("status") == "awaiting_approval", started
    assert host.svc.decide(started["id"], "accept") is True
    rid = started["id"]
    host.drive(lambda: host.event("result", "id", rid) is not None)
    assert not (host.p / "src").exists()
    done = host.undo(rid)
    assert not done["errors"], done
    assert (host.p / "src" / "a.txt").exists() and not (host.p / "src" / "late.txt").exists()
    _end(host, sid)
