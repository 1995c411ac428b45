"""The audit log: one JSON line per approval decision and per finished run. 0600, rotated by size."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any

RUN_FIELDS = (
    "id",
    "cmd",
    "cwd",
    "backend",
    "sandboxed",
    "background",
    "status",
    "exit_code",
    "signal",
    "timed_out",
    "killed",
    "duration_s",
    "output_bytes",
    "leftovers",
)


class AuditLog:
    """Append-only JSONL file; when it passes ``max_bytes`` it is moved to ``<path>.1``."""

    def __init__(self, path: str | None, max_bytes: int, enabled: bool = True) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.enabled = enabled and bool(path)

    def write(self, record: Mapping[str, Any]) -> None:
        if not self.enabled or not self.path:
            return
        line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}) + "\n"
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            try:
                if os.path.getsize(self.path) + len(line) > self.max_bytes:
                    os.replace(self.path, self.path + ".1")
            except FileNotFoundError:
                pass
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # auditing never breaks a run

    def decision(self, record: Mapping[str, Any]) -> None:
        keys = (
            "cmd",
            "cwd",
            "backend",
            "sandboxed",
            "pause",
            "rule",
            "reason",
            "decided_by",
            "user_reason",
            "source",
            "session_id",
        )
        self.write({"event": "decision", **{k: record.get(k) for k in keys if k in record}})

    def run(self, result: Mapping[str, Any], source: str | None = None) -> None:
        rec = {"event": "run", **{k: result.get(k) for k in RUN_FIELDS}}
        if source:
            rec["source"] = source
        self.write(rec)
