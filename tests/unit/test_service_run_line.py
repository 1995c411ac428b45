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
