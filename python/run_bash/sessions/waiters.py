"""Waiting for a session's output: a background run's readiness (``wait_for``) and the ``wait``
action. Matching happens in the capture path: each read is fed to the session's waiters as it
arrives, and the exit path settles the waiters that are left. A wait is a future; nothing polls."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from run_bash.boundary import number
from run_bash.config import DEFAULT_WAIT_S, MAX_WAIT_S
from run_bash.errors import UsageError
from run_bash.matching import (
    MATCH_LINE_BYTES,
    LineMatcher,
    PatternTooSlow,
    budget_s,
    compile_pattern,
    time_limit,
)
from run_bash.output import read_since
from run_bash.results import WaitResult
from run_bash.sessions.session import Session, Waiter
from run_bash.sessions.streaming import READ_CHUNK, Streams

# `wait` with a pattern also searches the output not read yet, up to its last this many bytes.
WAIT_SCAN_BYTES = 1024 * 1024


class Waiters:
    """The readiness waits and ``wait`` calls of one host's sessions. ``send_result(s)`` sends a
    running session's result once it is ready."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        streams: Streams,
        send_result: Callable[[Session], None],
    ) -> None:
        self.loop = loop
        self.streams = streams
        self.send_result = send_result

    def watch_readiness(self, s: Session, ready: re.Pattern[str]) -> None:
        """Send ``s``'s result as soon as a line of its output matches ``ready``."""
        s.wait_for = ready.pattern
        s.ready_waiter = Waiter(LineMatcher(ready), lambda o, line: self._ready(s, o, line))
        s.waiters.append(s.ready_waiter)

    def match(self, s: Session, data: bytes) -> None:
        """Capture path: feed a read to the session's waiters; settle those it matches."""
        for w in list(s.waiters):
            try:
                with time_limit(budget_s(len(data))):
                    line = w.matcher.feed(data)
            except PatternTooSlow:
                self._settle(s, w, "slow", None)
                continue
            if line is not None:
                self._settle(s, w, "matched", line)

    def _settle(self, s: Session, w: Waiter, outcome: str, line: str | None) -> None:
        if w in s.waiters:
            s.waiters.remove(w)
            w.settle(outcome, line)

    def settle_all(self, s: Session) -> None:
        """Exit path: the output is complete; its last line (if no newline ended it) can still
        match, then every waiter left hears of the exit."""
        for w in list(s.waiters):
            try:
                with time_limit(budget_s(MATCH_LINE_BYTES)):
                    line = w.matcher.finish()
            except PatternTooSlow:
                line = None
            self._settle(s, w, "exited" if line is None else "matched", line)

    def _ready(self, s: Session, outcome: str, line: str | None) -> None:
        """The readiness wait ended; a running session's result goes at once."""
        s.ready, s.matched_line = outcome, line
        s.ready_after_s = round(time.monotonic() - s.started_mono, 1)
        if s.ended_mono is None:  # the exit path sends the result itself, with the exit status
            self.send_result(s)

    def stop_readiness(self, s: Session) -> None:
        """The result goes now: stop matching for it and say why it was not a match."""
        w, s.ready_waiter = s.ready_waiter, None
        if w is None:
            return
        if w in s.waiters:
            s.waiters.remove(w)
        if s.ready is None and s.capture is not None:
            s.ready = "exited" if s.ended_mono is not None else "timeout"
            s.ready_after_s = round(time.monotonic() - s.started_mono, 1)

    def wait(
        self, s: Session, wait_for: object = None, timeout: object = None
    ) -> Awaitable[WaitResult]:
        """Wait (at most ``timeout`` seconds, 1..MAX_WAIT_S) for a line of output new since the
        last read to match ``wait_for``, or, without it, for the session to end. The arguments are
        checked at once (errors raise); the awaitable gives the outcome and the new output."""
        pattern = None if wait_for is None else compile_pattern(wait_for)
        t = number("timeout", timeout)
        if t is not None and not 1 <= t <= MAX_WAIT_S:
            raise UsageError(
                f"`timeout` of a wait must be 1..{MAX_WAIT_S} seconds, not {timeout!r}"
            )
        return self._wait(s, pattern, DEFAULT_WAIT_S if t is None else t)

    async def _wait(
        self, s: Session, pattern: re.Pattern[str] | None, timeout_s: float
    ) -> WaitResult:
        t0 = time.monotonic()
        if not s.running and s.status != "awaiting_approval":
            return self._waited(s, "ended", pattern, None, t0)
        settled: asyncio.Future[tuple[str, str | None]] = self.loop.create_future()

        def settle(outcome: str, line: str | None) -> None:
            if not settled.done():
                settled.set_result((outcome, line))

        waiter = None
        if pattern is not None:
            matcher = LineMatcher(pattern)
            if s.pipe_r >= 0:
                self.streams.on_readable(s)  # what is in the pipe already is output too
            early = self._scan_unread(s, matcher)
            if early is not None:
                return self._waited(s, early[0], pattern, early[1], t0)
            waiter = Waiter(matcher, settle)
            s.waiters.append(waiter)
        ended = self.loop.create_task(s.done.wait())  # also ends a run that never started
        try:
            either: set[asyncio.Future[Any]] = {settled, ended}
            await asyncio.wait(either, timeout=timeout_s, return_when="FIRST_COMPLETED")
        finally:
            ended.cancel()
            if waiter is not None and waiter in s.waiters:
                s.waiters.remove(waiter)
        if settled.done():
            outcome, line = settled.result()
        else:
            outcome, line = ("exited" if s.done.is_set() else "timeout"), None
        return self._waited(s, outcome, pattern, line, t0)

    def _scan_unread(self, s: Session, matcher: LineMatcher) -> tuple[str, str | None] | None:
        """Search the output not read yet (its last WAIT_SCAN_BYTES) before waiting for more."""
        cap = s.capture
        if cap is None or cap.capped or cap.written <= s.read_offset:
            return None
        start = max(s.read_offset, cap.written - WAIT_SCAN_BYTES)
        pos, skip_partial = start, start > s.read_offset
        while pos < cap.written:
            data, pos, _left = read_since(cap.path, pos, min(READ_CHUNK, cap.written - pos))
            if not data:
                break
            if skip_partial:  # the scan starts mid-output: begin at a line's start
                nl = data.find(b"\n")
                data = data[nl + 1 :] if nl >= 0 else b""
                skip_partial = nl < 0
            try:
                with time_limit(budget_s(len(data))):
                    line = matcher.feed(data)
            except PatternTooSlow:
                return ("slow", None)
            if line is not None:
                return ("matched", line)
        return None

    def _waited(
        self,
        s: Session,
        outcome: str,
        pattern: re.Pattern[str] | None,
        line: str | None,
        t0: float,
    ) -> WaitResult:
        page = self.streams.output(s)
        return WaitResult(
            **{f.name: getattr(page, f.name) for f in dataclasses.fields(page)},
            outcome=outcome,
            wait_for=None if pattern is None else pattern.pattern,
            matched_line=line,
            waited_s=round(time.monotonic() - t0, 2),
        )
