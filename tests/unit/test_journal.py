"""The audit journal: runs a host left open get their lines, once, from the keeper or a later host."""

from __future__ import annotations

import json
import os
import subprocess

from run_bash.journal import Journal, reconcile, reconcile_stale


def audit_lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def journal_with_runs(state, audit):
    j = Journal(str(state))
    j.audit(str(audit), 1 << 20, True)
    j.open("done", {"cmd": "echo done", "cwd": "/p"})
    j.closed("done")
    j.open("lost", {"cmd": "sleep 300", "cwd": "/p", "backend": "none"})
    j.open("held", {"cmd": "rm -rf x", "cwd": "/p"}, {"cmd": "rm -rf x", "rule": "rm"})
    j.open("decided", {"cmd": "make"}, {"cmd": "make"})
    j.decided("decided")
    return j


def test_reconcile_writes_what_the_host_left_out(tmp_path):
    state, audit = tmp_path / "state", tmp_path / "audit.jsonl"
    state.mkdir()
    journal_with_runs(state, audit)
    with open(state / "journal.jsonl", "a") as f:
        f.write('{"open": "cut sh')  # a line the crash cut short
    assert reconcile(str(state)) == 3
    lines = audit_lines(audit)
    runs = {r["id"]: r for r in lines if r["event"] == "run"}
    assert set(runs) == {"lost", "held", "decided"}  # "done" was closed by the host
    assert runs["lost"]["status"] == "lost" and runs["lost"]["killed"] is True
    assert runs["held"]["status"] == "cancelled" and runs["decided"]["status"] == "lost"
    [decision] = [r for r in lines if r["event"] == "decision"]
    assert decision["session_id"] == "held" and decision["decided_by"] == "host_exit"
    assert reconcile(str(state)) == 0  # once: the journal is gone


def test_a_later_host_closes_the_runs_of_hosts_that_are_gone(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    audit = tmp_path / "audit.jsonl"
    stale = tmp_path / f"run_bash-{dead.pid}-abc"
    alive = tmp_path / f"run_bash-{os.getpid()}-def"
    for d in (stale, alive):
        d.mkdir()
        journal_with_runs(d, audit)
    assert reconcile_stale(str(tmp_path)) == 3
    assert not stale.exists() and alive.exists()  # a live host's dir is its own
    assert len([r for r in audit_lines(audit) if r["event"] == "run"]) == 3


def test_a_decision_taken_is_written_once_whether_its_line_was_or_not(tmp_path):
    """A run journaled with the decision taken for it (``made``: its audit line is written just
    after it started) gets that decision from ``reconcile`` when the host died before the line;
    once the line is written (``decided``), reconcile writes only the run line."""
    state, audit = tmp_path / "state", tmp_path / "audit.jsonl"
    state.mkdir()
    j = Journal(str(state))
    j.audit(str(audit), 1 << 20, True)
    made = {"cmd": "sleep 9", "cwd": "/p", "decided_by": "auto", "source": "agent"}
    j.open("unwritten", {"cmd": "sleep 9", "cwd": "/p"}, made={**made, "session_id": "unwritten"})
    j.open("written", {"cmd": "sleep 9", "cwd": "/p"}, made={**made, "session_id": "written"})
    j.decided("written")
    assert reconcile(str(state)) == 2
    lines = audit_lines(audit)
    assert {r["id"]: r["status"] for r in lines if r["event"] == "run"} == {
        "unwritten": "lost",
        "written": "lost",
    }
    [decision] = [r for r in lines if r["event"] == "decision"]
    assert decision["session_id"] == "unwritten"
    assert decision["decided_by"] == "auto" and decision["source"] == "agent"
