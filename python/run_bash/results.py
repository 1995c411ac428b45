"""What the runtime reports: session info, run results, output pages and live output.

Frozen dataclasses, built by ``sessions.py``. ``to_wire()`` (one implementation, on ``Wire``) turns
any of them into plain msgpack- and JSON-safe data: the form Lua, the audit log and the command line
receive. Field names are the wire's keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


def plain(value: object) -> Any:
    """``value`` as plain data: dataclasses by their ``to_wire()``, tuples as lists."""
    if isinstance(value, Wire):
        return value.to_wire()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


class Wire:
    """Mixin of the report dataclasses: ``to_wire()`` gives their fields as plain data.

    An optional field (default None) that is unset is left out: Lua receives a nil inside a table
    as ``vim.NIL``, which is truthy, so ``if result.error then`` needs the key absent.
    """

    def to_wire(self) -> dict[str, Any]:
        assert dataclasses.is_dataclass(self)
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            out[f.name] = plain(value)
        return out


@dataclass(frozen=True)
class ForwardedPort(Wire):
    """A session's server port forwarded to the host (``sandbox/forward.py``)."""

    port: int  # where the server listens, in its project's network namespace
    host_port: int  # where the host reaches it: 127.0.0.1:host_port (a port the kernel picked)


@dataclass(frozen=True)
class SessionInfo(Wire):
    """One session as lists, completion and events show it."""

    id: str
    cmd: str
    cwd: str
    # running | exited | timed_out | killed (also before it started) | failed (could not start)
    # | awaiting_approval (held) | rejected | cancelled (never started)
    status: str
    pid: int | None
    backend: str
    sandboxed: bool
    background: bool
    started_at: float  # epoch seconds
    age_s: float
    duration_s: float
    exit_code: int | None
    signal: int | None
    timed_out: bool
    killed: bool
    output_file: str | None
    output_bytes: int
    notices: tuple[str, ...]
    # What the run changed in its project (``run_changes``): {summary, counts, paths}, or
    # {not_recorded}; absent while unknown (undo off, still running).
    changes: dict[str, Any] | None = None
    # TCP ports the session's processes listen on (while it runs).
    ports: tuple[int, ...] = ()
    # Those of them forwarded to the host, with the host port of each (while it runs).
    forwarded: tuple[ForwardedPort, ...] = ()


@dataclass(frozen=True)
class RunResult(SessionInfo):
    """A run's result: at exit (foreground), after ``bg_after`` (background), or why it never ran."""

    # Output for the agent: ANSI stripped, capped at output.max_chars (head + tail).
    output: str = ""
    truncated: bool = False
    file_capped: bool = False
    # Processes the command left behind that were stopped when it ended.
    leftovers: int = 0
    # Why it did not run (could not start, rejected, cancelled); None when it ran.
    error: str | None = None
    # The answer to a kill of a session that had already ended.
    already_ended: bool = False
    # `wait_for` of a background run: the pattern, and how waiting for it ended: "matched" (a line
    # matched: `matched_line`), "timeout" (bg_after passed first), "exited" (the command ended
    # first) or "slow" (the pattern took too long and was dropped); after `ready_after_s` seconds.
    wait_for: str | None = None
    ready: str | None = None
    matched_line: str | None = None
    ready_after_s: float | None = None
    # When each stage of the run was reached, in ``time.monotonic()`` seconds of the host (the
    # same clock as Neovim's ``vim.uv.hrtime()``): what ``make bench`` breaks a run down by.
    timing: dict[str, float] | None = None


@dataclass(frozen=True)
class OutputPage(SessionInfo):
    """New output since the last read (bounded), or the last lines."""

    output: str = ""
    unread_bytes: int = 0


@dataclass(frozen=True)
class WaitResult(OutputPage):
    """The answer to ``wait``: how the wait ended, with the output new since the last read.

    ``outcome``: "matched" (a new line matched ``wait_for``: ``matched_line``), "exited" (the
    session ended while waited for), "ended" (it had ended before), "timeout", or "slow" (the
    pattern took too long and was dropped).
    """

    outcome: str = "timeout"
    wait_for: str | None = None
    matched_line: str | None = None
    waited_s: float = 0.0


@dataclass(frozen=True)
class SessionEnd(SessionInfo):
    """A background session ended (the ``exited`` event), with its last lines of output."""

    tail: str = ""


@dataclass(frozen=True)
class LiveStart(SessionInfo):
    """What a session printed so far, when its live output starts being followed."""

    data: str = ""


@dataclass(frozen=True)
class OutputChunk(Wire):
    """Live output of a followed session (the ``output`` event)."""

    id: str
    data: str


@dataclass(frozen=True)
class Forgotten(Wire):
    """Sessions the history dropped (the ``forgotten`` event): Lua forgets them too."""

    ids: tuple[str, ...]
