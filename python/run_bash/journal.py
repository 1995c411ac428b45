"""The audit journal: what a host has opened and not yet closed, so no run is left without its lines.

The host appends one JSON line per event to ``<state dir>/journal.jsonl`` (0600, in the 0700 state
dir): ``audit`` (where the audit log is and its settings), ``open`` (a run began: its run line so
far, and its decision line when nobody has decided yet, or the decision taken when its line is
still to be written), ``decided`` and ``closed``. When a host ends
without closing a run (a crash, a kill), ``reconcile`` writes what is missing to the audit log: a
decision line ``host_exit`` for a run nobody decided on (or the decision taken, for a run that
started before its line was written), and a run line with status ``cancelled``
(it never started) or ``lost`` (it was running; the keeper killed what was left). The keeper calls
it when the host exits; a host that starts calls it for the state dirs of hosts that are gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

from run_bash.audit import AuditLog

log = logging.getLogger("run_bash")

JOURNAL = "journal.jsonl"
STATE_DIR_RE = re.compile(r"^run_bash-(\d+)-")


class Journal:
    """Appends to one host's journal; never raises (auditing never breaks a run)."""

    def __init__(self, state_dir: str) -> None:
        self.path = os.path.join(state_dir, JOURNAL)

    def _append(self, entry: Mapping[str, Any]) -> None:
        line = (json.dumps(entry, default=str) + "\n").encode("utf-8", "surrogateescape")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return
        try:
            os.write(fd, line)
        except OSError:
            pass
        finally:
            os.close(fd)

    def audit(self, path: str | None, max_bytes: int, enabled: bool) -> None:
        self._append({"audit": {"path": path, "max_bytes": max_bytes, "enabled": enabled}})

    def open(
        self,
        sid: str,
        run: Mapping[str, Any],
        decision: Mapping[str, Any] | None = None,
        made: Mapping[str, Any] | None = None,
    ) -> None:
        """A run began; ``decision`` is its decision line when nobody has decided yet, ``made``
        the line of a decision taken that is written to the audit log just after (``decided``
        says it was)."""
        entry: dict[str, Any] = {"open": sid, "run": dict(run), "decision": decision}
        if made is not None:
            entry["made"] = dict(made)
        self._append(entry)

    def decided(self, sid: str) -> None:
        self._append({"decided": sid})

    def closed(self, sid: str) -> None:
        self._append({"closed": sid})


def reconcile(state_dir: str) -> int:
    """Write the audit lines the host of ``state_dir`` left out; return how many runs it closed."""
    path = os.path.join(state_dir, JOURNAL)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return 0
    audit: AuditLog | None = None
    runs: dict[str, dict[str, Any]] = {}
    pending: dict[str, dict[str, Any]] = {}
    made: dict[str, dict[str, Any]] = {}  # decisions taken whose line may not be written yet
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by the crash
        if "audit" in entry:
            a = entry["audit"]
            audit = AuditLog(a.get("path"), int(a.get("max_bytes") or 0), bool(a.get("enabled")))
        elif "open" in entry:
            runs[entry["open"]] = entry.get("run") or {}
            if entry.get("decision"):
                pending[entry["open"]] = entry["decision"]
            if entry.get("made"):
                made[entry["open"]] = entry["made"]
        elif "decided" in entry:
            pending.pop(entry["decided"], None)
            made.pop(entry["decided"], None)
        elif "closed" in entry:
            runs.pop(entry["closed"], None)
            pending.pop(entry["closed"], None)
            made.pop(entry["closed"], None)
    if audit is None:
        return 0
    for sid, run in runs.items():
        decision = pending.get(sid)
        if decision is not None:
            audit.decision({**decision, "decided_by": "host_exit", "session_id": sid})
        elif sid in made:  # decided, and started, before its line was written
            audit.decision({**made[sid], "session_id": sid})
        status = "cancelled" if decision is not None else "lost"
        audit.run({**run, "id": sid, "status": status, "killed": status == "lost"})
    with contextlib.suppress(OSError):
        os.unlink(path)
    return len(runs)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reconcile_stale(root: str) -> int:
    """Close the runs of every host whose state dir in ``root`` outlived it (both it and its keeper
    were killed), and remove those dirs; return how many runs were closed."""
    closed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    uid = os.geteuid()
    for name in names:
        m = STATE_DIR_RE.match(name)
        path = os.path.join(root, name)
        if not m or _alive(int(m.group(1))):
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid != uid or not os.path.isdir(path) or os.path.islink(path):
            continue
        try:
            closed += reconcile(path)
        except Exception:
            log.exception("could not close the runs of %s", path)
        shutil.rmtree(path, ignore_errors=True)
    return closed
