"""One session (a command, its process, output and state) and the checks of a run request.

Plain data and validation: no I/O beyond reading /proc for a running session's ports.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from run_bash.boundary import number
from run_bash.config import MAX_BG_AFTER_S, MAX_TIMEOUT_S, describe
from run_bash.errors import UsageError
from run_bash.matching import LineMatcher, compile_pattern
from run_bash.output import Capture
from run_bash.results import ForwardedPort, RunResult, SessionInfo
from run_bash.sandbox import proc
from run_bash.sandbox.base import Backend, Launched

if TYPE_CHECKING:
    from run_bash.changes import Token
    from run_bash.run_changes import CoverSpec

MAX_CMD_CHARS = 100_000
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # 32 letters: a random byte % 32 is uniform
# What an id a caller chose may hold (``caller_id``).
ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def new_id(taken: Mapping[str, object]) -> str:
    """A short random id (6 chars, ~1e9 values) not in ``taken``."""
    while True:
        sid = "".join(ID_ALPHABET[b % len(ID_ALPHABET)] for b in os.urandom(6))
        if sid not in taken:
            return sid


def caller_id(value: str) -> str:
    """An id a caller chose for its run (a run Lua queued while the host started): 6 to 16
    characters of a-z and 0-9, as safe in file names as ``new_id``'s. Raises UsageError."""
    if not 6 <= len(value) <= 16 or not all(c in ID_CHARS for c in value):
        raise UsageError(f"`id` should be 6 to 16 characters of a-z and 0-9, not {value!r}")
    return value


def check_cmd(cmd: object) -> str:
    """The command text, or one clear UsageError (not a string, empty, a NUL byte, too long).
    Cheap: it runs before the pause list parses anything."""
    if not isinstance(cmd, str):
        raise UsageError(f"`cmd` should be a string, not {describe(cmd)}")
    if not cmd.strip():
        raise UsageError("`cmd` is empty")
    if "\0" in cmd:
        raise UsageError("`cmd` contains a NUL byte")
    if len(cmd) > MAX_CMD_CHARS:
        raise UsageError(
            f"`cmd` is {len(cmd)} characters; the limit is {MAX_CMD_CHARS} "
            "(write the script to a file and run the file)"
        )
    return cmd


def ready_pattern(wait_for: object, bg_after_s: float) -> re.Pattern[str] | None:
    """The compiled ``wait_for`` of a run (None when not given); it needs a background run."""
    if wait_for is None:
        return None
    pattern = compile_pattern(wait_for)
    if bg_after_s <= 0:
        raise UsageError(
            "`wait_for` needs `bg_after`: the most seconds to wait for a matching line "
            f"(1..{MAX_BG_AFTER_S}); the command then keeps running in the background"
        )
    return pattern


def validate_request(
    cmd: object, timeout: object, bg_after: object, default_timeout: float
) -> tuple[str, float, float, bool]:
    """Check a run request; return (cmd, timeout_s, bg_after_s, timeout_given)."""
    cmd = check_cmd(cmd)
    t = number("timeout", timeout)
    if t is not None and not 1 <= t <= MAX_TIMEOUT_S:
        raise UsageError(f"`timeout` must be 1..{MAX_TIMEOUT_S} seconds, not {timeout!r}")
    b = number("bg_after", bg_after) or 0.0
    if not 0 <= b <= MAX_BG_AFTER_S:
        raise UsageError(f"`bg_after` must be 0..{MAX_BG_AFTER_S} seconds, not {bg_after!r}")
    return cmd, default_timeout if t is None else t, b, t is not None


@dataclass
class Waiter:
    """Someone waiting for a line of a session's output to match: ``settle(outcome, line)`` is
    called once, with "matched" and the line, "slow" (the pattern was dropped) or "exited"."""

    matcher: LineMatcher
    settle: Callable[[str, str | None], None]


class Session:
    """One command: its process, output and state."""

    def __init__(self, sid: str, cmd: str, cwd: str, backend: Backend, bg_after: float) -> None:
        self.id = sid
        self.cmd = cmd
        self.cwd = cwd
        self.backend = backend
        self.background = bg_after > 0
        self.bg_after = bg_after
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.ended_mono: float | None = None
        # Why the session must be kept although it is old (an open :RunBashOutput buffer): pinned
        # sessions are never forgotten (``SessionManager.pin``); nor are runs whose change set the
        # undo store keeps (``change_set_kept``).
        self.pins: set[str] = set()
        # running | exited | timed_out | killed (also before it started) | failed (could not start)
        # | awaiting_approval (held) | rejected | cancelled (never started)
        self.status = "running"
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.timed_out = False
        self.killed = False
        self.leftovers = 0
        self.notices: list[str] = []
        self.live = False
        self.read_offset = 0
        self.capture: Capture | None = None
        self.launched: Launched | None = None  # dropped when the run has ended
        self.root_pid: int | None = None
        self.tracker: proc.Tracker | None = None
        self.tmpdir = ""
        # Ports of its servers forwarded to the host: port in its namespace -> host port.
        self.forwarded: dict[int, int] = {}
        self.pipe_r = -1
        self.pidfd = -1
        self.result_sent = False
        self.result: RunResult | None = None
        self.result_future: asyncio.Future[RunResult] | None = None
        self.done: asyncio.Event = asyncio.Event()
        self.timers: list[asyncio.TimerHandle] = []
        self.live_buf: list[str] = []
        self.live_pending = b""
        self.live_timer: asyncio.TimerHandle | None = None
        self.pipe_eof = asyncio.Event()
        self.timeout_s = 0.0
        self.timeout_given = False
        self.error: str | None = None
        # What the run changed in its project (``run_changes``), and its store token meanwhile.
        self.changes: dict[str, Any] | None = None
        self.change_token: Token | None = None
        # What undo must cover for it to start without asking (the gate let it through on
        # that), and why it asks after all when the snapshot before it says otherwise.
        self.cover: CoverSpec | None = None
        self.hold: str | None = None
        # Readiness (`wait_for` on run) and `wait` calls, fed by the capture path.
        self.waiters: list[Waiter] = []
        self.ready_waiter: Waiter | None = None
        self.wait_for: str | None = None
        self.ready: str | None = None
        self.matched_line: str | None = None
        self.ready_after_s: float | None = None
        # When each stage of the run was reached (``time.monotonic()``; ``make bench`` reads them
        # from the result's ``timing``): rpc, gate, queued, snapshot, policy, hostread, guard,
        # spawn, spawned (and the backend's own stages), first_byte, exit, reaped, swept,
        # checked, changes, result.
        self.marks: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        """Note that the run reached ``stage`` now (the first time counts)."""
        self.marks.setdefault(stage, time.monotonic())

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def pid(self) -> int | None:
        return self.launched.pid if self.launched else self.root_pid

    @property
    def duration_s(self) -> float:
        end = self.ended_mono if self.ended_mono is not None else time.monotonic()
        return round(end - self.started_mono, 3)

    def fields(self, ports: bool = True) -> dict[str, Any]:
        """The ``SessionInfo`` fields of this session now (``ports``: False leaves the listening
        ports out, for a run spawned this instant: nothing of it listens yet)."""
        return {
            "id": self.id,
            "cmd": self.cmd,
            "cwd": self.cwd,
            "status": self.status,
            "pid": self.pid,
            "backend": self.backend.name,
            "sandboxed": bool(self.backend.isolates),
            "background": self.background,
            "started_at": self.started_at,
            "age_s": round(time.time() - self.started_at, 1),
            "duration_s": self.duration_s,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "killed": self.killed,
            # Kept when the history removed the file: its notice says so.
            "output_file": self.capture.path if self.capture else None,
            "output_bytes": self.capture.total if self.capture else 0,
            "notices": tuple(self.notices),
            "changes": self.changes,
            "ports": self.ports() if ports else (),
            "forwarded": tuple(
                ForwardedPort(port, host) for port, host in sorted(self.forwarded.items())
            ),
        }

    def ports(self) -> tuple[int, ...]:
        """The TCP ports the session's processes listen on now (none once it ended)."""
        if not self.running or self.tracker is None:
            return ()
        from run_bash.sandbox.loopback import listening_ports

        return tuple(listening_ports(self.tracker.members()))

    def info(self, ports: bool = True) -> SessionInfo:
        """The summary for lists, completion and events (``ports``: see ``fields``)."""
        return SessionInfo(**self.fields(ports))
