"""Watching a command's output for a line that matches a pattern (``wait_for``). No pynvim, no I/O.

The pattern is Python ``re`` syntax and is matched against each line on its own (``re.search``), as
the output arrives. A line ends at ``\\n`` or ``\\r`` (a progress bar's rewrite is a line of its own);
a line is cut to its first ``MATCH_LINE_BYTES`` bytes, then escape sequences and other control
characters are removed. A line split across reads
is matched once it is complete; the last line, if no newline ends it, when the command exits.

Cost per read is one pass over the new bytes, never a rescan of earlier output: the unterminated
line is the only thing carried over (at most ``MATCH_LINE_BYTES``). When the pattern cannot change
its answer by seeing neighbouring lines (no ``\\A``, ``\\Z``, negative lookaround or ``(?-m``), a
read's complete lines are searched in one call with ``re.MULTILINE`` and only a line the search
lands on is checked on its own; otherwise each line is searched.

Untrusted output meets the agent's pattern here, and ``re`` can take exponential time on a pattern
such as ``(a+)+$``. Two bounds keep the host responsive: the line cap above, and a limit on the CPU
time each read's matching may use (``time_limit``): ``re`` polls for signals while it matches, so a
``SIGPROF`` from the process's CPU-time interval timer interrupts even a runaway match. CPU time,
not wall time: a host that a busy machine leaves waiting for a core is not matching. A pattern that
runs over the limit is dropped (``PatternTooSlow``); the session keeps running.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator

from run_bash.config import describe
from run_bash.errors import UsageError
from run_bash.output import strip_controls

MATCH_LINE_BYTES = 4096  # a longer line is matched on its first this many bytes
MAX_PATTERN_CHARS = 1000
# CPU time one read's matching may use: a base, plus a share for the read's size (a read is at most
# 256 KiB; a literal gets through that in well under 1 ms, 2-byte lines one at a time in ~12 ms).
MATCH_BUDGET_S = 0.05
MATCH_BUDGET_S_PER_MIB = 0.25

# Constructs whose answer for a line can depend on the lines around it when several lines are
# searched at once (conservative: a backslash-escaped backslash before A also counts).
_NEEDS_ONE_LINE = re.compile(r"\\[AZ]|\(\?<?!|\(\?-")


class PatternTooSlow(Exception):
    """Matching went over its time limit."""


def compile_pattern(value: object, name: str = "wait_for") -> re.Pattern[str]:
    """The compiled pattern, or one clear UsageError that says what is wrong with it."""
    if not isinstance(value, str):
        raise UsageError(
            f"`{name}` should be a string (a regular expression), not {describe(value)}"
        )
    if not value:
        raise UsageError(f'`{name}` is empty: give a regular expression such as "Listening on"')
    if len(value) > MAX_PATTERN_CHARS:
        raise UsageError(f"`{name}` is {len(value)} characters; the limit is {MAX_PATTERN_CHARS}")
    try:
        return re.compile(value)
    except re.error as err:
        where = f" at position {err.pos}" if err.pos is not None else ""
        raise UsageError(
            f"`{name}` is not a valid regular expression (Python `re` syntax): {err.msg}{where} "
            f"in {value!r}"
        ) from None


def budget_s(nbytes: int) -> float:
    """The time limit for matching ``nbytes`` of output."""
    return MATCH_BUDGET_S + MATCH_BUDGET_S_PER_MIB * nbytes / (1024 * 1024)


class _Alarm:
    """The SIGPROF handler: raises only while a ``time_limit`` block is armed."""

    armed = False
    installed = False

    @classmethod
    def handler(cls, _signum: int, _frame: object) -> None:
        if cls.armed:
            cls.armed = False
            raise PatternTooSlow


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``PatternTooSlow`` inside the block once the process has used ``seconds`` of CPU time
    in it (``ITIMER_PROF``, user + system).

    Python runs signal handlers in the main thread only, which is where the host's event loop
    runs; elsewhere (never in the host) the block runs without a limit. The timer is armed only
    around the block, so it expires while the main thread is busy in it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _Alarm.installed or signal.getsignal(signal.SIGPROF) is not _Alarm.handler:
        signal.signal(signal.SIGPROF, _Alarm.handler)
        _Alarm.installed = True
    _Alarm.armed = True
    signal.setitimer(signal.ITIMER_PROF, max(seconds, 0.001))
    try:
        yield
    finally:
        _Alarm.armed = False
        signal.setitimer(signal.ITIMER_PROF, 0)


class LineMatcher:
    """Feed it a command's output in pieces; it says which line matched first."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        # The same pattern over many lines at once, when that cannot hide a line's match.
        self._many: re.Pattern[str] | None = None
        if not _NEEDS_ONE_LINE.search(pattern.pattern):
            self._many = re.compile(pattern.pattern, pattern.flags | re.MULTILINE)
        self._pending = bytearray()  # the line not yet ended (its first MATCH_LINE_BYTES bytes)
        self._after_cr = (
            False  # the last piece ended with \r: a \n that starts the next is its pair
        )

    def feed(self, data: bytes) -> str | None:
        """The first line completed by ``data`` that matches (cleaned text), or None."""
        if self._after_cr and data.startswith(b"\n"):
            data = data[1:]
        if not data:
            return None
        self._after_cr = data.endswith(b"\r")
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = data.rfind(b"\n")
        if end < 0:
            self._hold(data)
            return None
        block = bytes(self._pending) + data[:end] if self._pending else data[:end]
        self._pending.clear()
        self._hold(data[end + 1 :])
        return self._search(block)

    def finish(self) -> str | None:
        """The output ended: match its last line if no newline ended it."""
        if not self._pending:
            return None
        block = bytes(self._pending)
        self._pending.clear()
        return self._search(block)

    def _hold(self, data: bytes) -> None:
        room = MATCH_LINE_BYTES - len(self._pending)
        if room > 0 and data:
            self._pending += data[:room]

    def _search(self, block: bytes) -> str | None:
        """Search ``block``: complete lines joined by ``\\n`` (no trailing newline)."""
        if _has_long_line(block):
            lines = [
                strip_controls(line[:MATCH_LINE_BYTES]).decode("utf-8", "replace")
                for line in block.split(b"\n")
            ]
            return next(filter(self.pattern.search, lines), None)
        # No escape sequence spans a newline, so cleaning the block cleans each line.
        text = strip_controls(block).decode("utf-8", "replace")
        if self._many is None:
            return next(filter(self.pattern.search, text.split("\n")), None)
        # A line that matches on its own also matches inside the block (the block's search is a
        # superset), and the block's leftmost match is never after it: so every line before the
        # one the block search lands on is a miss, and the search goes on after that line.
        pos = 0
        while True:
            m = self._many.search(text, pos)
            if m is None:
                return None
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start())
            if end < 0:
                end = len(text)
            line = text[start:end]
            if self.pattern.search(line):
                return line
            if end >= len(text):
                return None
            pos = end + 1


def _has_long_line(block: bytes) -> bool:
    """Whether a line of ``block`` is longer than ``MATCH_LINE_BYTES``, in ~len/cap steps: each
    step starts at a line's start and jumps past the last newline within the next cap+1 bytes."""
    if len(block) <= MATCH_LINE_BYTES:
        return False
    pos, n = 0, len(block)
    while n - pos > MATCH_LINE_BYTES:
        nl = block.rfind(b"\n", pos, pos + MATCH_LINE_BYTES + 1)
        if nl < 0:
            return True
        pos = nl + 1
    return False
