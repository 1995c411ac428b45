"""The audit log: one JSON line per approval decision, per finished run and per undo. 0600, rotated
by size. A run line carries what the run changed in its project (counts and the first paths); an
undo line, what it restored and removed.

Every line is strict JSON: text that held invalid UTF-8 (surrogate escapes, as commands from Lua
arrive) is written with those bytes as ``\\xHH``, never as lone surrogates.
"""

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
    "changes",
)
UNDO_PATHS = 20  # paths listed per kind in an undo line (the counts are complete)


def valid_text(value: Any) -> Any:
    """``value`` with every string made valid Unicode: undecodable bytes become ``\\xHH``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            pass
        try:
            return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is not an escaped byte
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, Mapping):
        return {str(valid_text(k)): valid_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [valid_text(v) for v in value]
    return value


class AuditLog:
    """Append-only JSONL file; when it passes ``max_bytes`` it is moved to ``<path>.1``."""

    def __init__(self, path: str | None, max_bytes: int, enabled: bool = True) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.enabled = enabled and bool(path)

    def write(self, record: Mapping[str, Any]) -> None:
        if not self.enabled or not self.path:
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        line = json.dumps(valid_text({"time": stamp, **record}), ensure_ascii=False) + "\n"
        data = line.encode("utf-8")
        fd = -1
        try:
            fd = self._open(self.path)
            if os.fstat(fd).st_size + len(data) > self.max_bytes:
                os.close(fd)
                fd = -1
                os.replace(self.path, self.path + ".1")
                fd = self._open(self.path)
            os.fchmod(fd, 0o600)
            os.write(fd, data)
        except OSError:
            pass  # auditing never breaks a run
        finally:
            if fd >= 0:
                os.close(fd)

    @staticmethod
    def _open(path: str) -> int:
        """The log opened to append (made, in a 0700 directory, when it is not there)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            return os.open(path, flags, 0o600)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            return os.open(path, flags, 0o600)

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
        changes = result.get("changes")
        if isinstance(changes, Mapping):
            keep = ("counts", "paths", "not_recorded")
            rec["changes"] = {k: changes[k] for k in keep if k in changes}
        else:
            rec.pop("changes")
        if source:
            rec["source"] = source
        self.write(rec)

    def undo(self, done: Mapping[str, Any]) -> None:
        """An undo (``RunChanges.undo``'s outcome): what it restored and removed."""
        rec: dict[str, Any] = {
            "event": "undo",
            "id": done.get("run"),
            "undo_of": done.get("undo_of"),
            "project": done.get("project"),
            "forced": bool(done.get("force")),
            "counts": {},
        }
        for kind in ("restored", "removed", "conflicts", "not_recovered", "errors"):
            items = list(done.get(kind) or [])
            rec["counts"][kind] = len(items)
            if items or kind in ("restored", "removed"):
                rec[kind] = items[:UNDO_PATHS]
        rec["recorded"] = done.get("recorded")
        self.write(rec)
