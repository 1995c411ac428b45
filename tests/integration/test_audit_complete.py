"""Audit completeness in a real Neovim: every run has exactly one decision line and one run line, for
a run the user cancelled, runs lost when the host crashed (written by the keeper), and a run killed
when Neovim exits."""

from __future__ import annotations

import collections
import contextlib
import json
from pathlib import Path

import psutil
import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.nvim


def records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def lines_of(path: Path, sid: str) -> list[dict]:
    return [
        r
        for r in records(path)
        if r.get("session_id") == sid or (r["event"] == "run" and r["id"] == sid)
    ]


def test_every_run_has_one_decision_and_one_run_line(editor):
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    path = Path(editor.lua("return require('run_bash.audit_log').path()"))

    def start(spec):
        return editor.lua(
            "local info, err = require('run_bash').run(...); return info or { error = err }", spec
        )["id"]

    # Cancelled by the user in the approval window.
    cancelled = start({"cmd": "echo never"})
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 1)
    editor.nvim.input("q")
    wait_for(lambda: len(lines_of(path, cancelled)) == 2)

    # Lost in a host crash: a running background session and a run still waiting for the user.
    running = start({"cmd": "sleep 300", "bg_after": 1, "unsandboxed_ok": True})
    waiting = start({"cmd": "echo waiting"})
    keeper = psutil.Process(
        editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    )
    wait_for(lambda: any(p.name() == "sleep" for p in keeper.children(recursive=True)))
    keeper.children()[0].kill()  # the host, e.g. by the OOM killer
    wait_for(lambda: len(lines_of(path, running)) == 2 and len(lines_of(path, waiting)) == 2)
    editor.nvim.input("q")  # the window of the lost run: its late answer changes nothing

    # Killed when Neovim exits (the host restarts on the next call).
    killed = start({"cmd": "sleep 301", "bg_after": 1, "unsandboxed_ok": True})
    wait_for(lambda: editor.lua("return (require('run_bash').sessions[...] or {}).status", killed))
    with contextlib.suppress(Exception):
        editor.nvim.command("qa!")
    wait_for(lambda: len(lines_of(path, killed)) == 2)

    recs = records(path)
    decisions = collections.Counter(r["session_id"] for r in recs if r["event"] == "decision")
    runs = collections.Counter(r["id"] for r in recs if r["event"] == "run")
    assert set(decisions) == set(runs) == {cancelled, running, waiting, killed}
    assert set(decisions.values()) == set(runs.values()) == {1}
    by_id = {r["id"]: r for r in recs if r["event"] == "run"}
    decided = {r["session_id"]: r["decided_by"] for r in recs if r["event"] == "decision"}
    assert (by_id[cancelled]["status"], decided[cancelled]) == ("cancelled", "user_cancel")
    assert (by_id[running]["status"], decided[running]) == ("lost", "user_accept")
    assert (by_id[waiting]["status"], decided[waiting]) == ("cancelled", "host_exit")
    assert (by_id[killed]["status"], decided[killed]) == ("killed", "user_accept")


def test_runs_of_a_host_killed_with_its_keeper_are_closed_by_the_next_keeper(editor):
    """The host and its keeper are both SIGKILLed (nothing of them writes the run line): the
    next host's keeper finds their state dir and writes it, beside the new host's start. The
    control: before the next host starts, the line is missing."""
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    path = Path(editor.lua("return require('run_bash.audit_log').path()"))
    lost = editor.lua(
        "local info, err = require('run_bash').run(...); return info or { error = err }",
        {"cmd": "sleep 300", "bg_after": 1, "unsandboxed_ok": True},
    )["id"]
    keeper = psutil.Process(
        editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    )
    wait_for(lambda: any(p.name() == "sleep" for p in keeper.children(recursive=True)))
    tree = [keeper, *keeper.children(recursive=True)]
    # Everything at once, so that nobody is left to write the run line: stopped first (a host
    # whose keeper died before it gets its SIGTERM and closes its runs; a keeper whose host died
    # first closes them too), then killed.
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.suspend()
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(tree, timeout=10)
    wait_for(lambda: editor.lua("return require('run_bash').is_running()") is False)
    assert [r["event"] for r in lines_of(path, lost)] == ["decision"]  # the control
    assert editor.lua("return require('run_bash').request('sessions')") == []  # a new host
    ended = wait_for(lambda: [r for r in lines_of(path, lost) if r["event"] == "run"])
    assert len(ended) == 1 and ended[0]["status"] == "lost", ended
