"""A run's audit line is written once its result is sent (``Service.emit``), and also when
sending it failed: the log never depends on the editor's channel."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from run_bash.service import Service


@pytest.mark.parametrize("fails", [False, True])
async def test_the_run_line_follows_the_result_sent_or_not(tmp_path: Path, fails: bool):
    audit = tmp_path / "audit.jsonl"
    sent: list[str] = []

    def emit(name: str, _payload: dict) -> None:
        sent.append(name)
        assert not audit.exists()  # the result goes first
        if fails:
            raise OSError("the channel is closed")

    service = Service(
        asyncio.get_running_loop(),
        emit,
        environ={**os.environ, "RUN_BASH_AUDIT": str(audit)},
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    run = {"id": "abc123", "cmd": "true", "cwd": str(tmp_path), "status": "exited"}
    if fails:
        with pytest.raises(OSError):
            service.emit("result", run)
    else:
        service.emit("result", run)
    assert sent == ["result"]
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(r["event"], r["id"]) for r in lines] == [("run", "abc123")]
    await service.mgr.shutdown()


async def test_a_run_is_journaled_with_its_decision_before_it_starts(tmp_path: Path):
    """The journal holds a run's decision before anything of it starts (the command finds it
    there); the decision's audit line follows at once after the start, before the run line,
    and the journal says it was written (no second line from ``reconcile``)."""
    audit = tmp_path / "audit.jsonl"
    state = tmp_path / "state"
    loop = asyncio.get_running_loop()
    results: asyncio.Queue[dict] = asyncio.Queue()

    def emit(name: str, payload: dict) -> None:
        if name == "result" and payload.get("status") != "running":
            results.put_nowait(payload)

    service = Service(
        loop, emit, environ={**os.environ, "RUN_BASH_AUDIT": str(audit)}, state_dir=str(state)
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    service.setup({"sandbox": {"backend": "none"}, "undo": {"enabled": False}})
    journal = state / "journal.jsonl"
    # The command reads the journal as it runs: its own entry, with the decision, is there.
    cmd = f'grep -c \'"made": {{"cmd"\' {journal}'
    started = service.run({"cmd": cmd, "cwd": str(tmp_path), "unsandboxed_ok": True})
    decisions = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(r["event"], r["session_id"]) for r in decisions] == [("decision", started["id"])]
    result = await asyncio.wait_for(results.get(), 30)
    assert result["exit_code"] == 0 and result["output"].strip() == "1", result
    entries = [json.loads(x) for x in journal.read_text().splitlines()]
    kinds = [
        next(k for k in ("open", "decided", "closed") if k in e)
        for e in entries
        if "audit" not in e
    ]
    assert kinds == ["open", "decided", "closed"]
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [r["event"] for r in lines] == ["decision", "run"]
    await service.mgr.shutdown()


async def test_with_the_audit_log_off_the_journal_holds_no_decision_to_write(tmp_path: Path):
    """No line will be written (by the host or the keeper): the journal keeps only what it needs
    to close the run (the test above is the control, with the log on)."""
    audit = tmp_path / "audit.jsonl"
    state = tmp_path / "state"
    results: asyncio.Queue[dict] = asyncio.Queue()

    def emit(name: str, payload: dict) -> None:
        if name == "result" and payload.get("status") != "running":
            results.put_nowait(payload)

    service = Service(
        asyncio.get_running_loop(),
        emit,
        environ={**os.environ, "RUN_BASH_AUDIT": str(audit)},
        state_dir=str(state),
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    service.setup(
        {"sandbox": {"backend": "none"}, "undo": {"enabled": False}, "audit": {"enabled": False}}
    )
    service.run({"cmd": "true", "cwd": str(tmp_path), "unsandboxed_ok": True})
    result = await asyncio.wait_for(results.get(), 30)
    assert result["exit_code"] == 0, result
    entries = [json.loads(x) for x in (state / "journal.jsonl").read_text().splitlines()]
    runs = [e for e in entries if "audit" not in e]
    assert [next(iter(e)) for e in runs] == ["open", "closed"]
    assert "made" not in runs[0] and not audit.exists()
    await service.mgr.shutdown()
