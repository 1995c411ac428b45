"""A session's output on its way in: the capture path (the run's pipe into its output file), the
live view's throttled chunks, and reads of what was printed (``output``, ``watch``)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from run_bash.config import Config
from run_bash.errors import UsageError
from run_bash.output import READ_PAGE_BYTES, clean_text
from run_bash.results import LiveStart, OutputChunk, OutputPage, Wire
from run_bash.sessions.session import Session

READ_CHUNK = 256 * 1024
LIVE_CHUNK_CHARS = 64 * 1024

log = logging.getLogger("run_bash")


class Streams:
    """Reads every run's pipe into its capture, feeds the readers that match lines
    (``on_data(s, data)``: the waiters) and sends live output events."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        config: Callable[[], Config],
        on_event: Callable[[str, Wire], None],
        on_data: Callable[[Session, bytes], None],
    ) -> None:
        self.loop = loop
        self._config = config
        self.on_event = on_event
        self.on_data = on_data

    def on_readable(self, s: Session) -> None:
        got = 0
        while got < 4 * READ_CHUNK:
            try:
                data = os.read(s.pipe_r, READ_CHUNK)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self.close_pipe(s)
                break
            if not got:
                s.mark("first_byte")
            got += len(data)
            assert s.capture is not None
            s.capture.feed(data)
            if s.live:
                self._queue_live(s, data)
            self.report_stop(s)
            if s.waiters:
                self.on_data(s, data)

    def report_stop(self, s: Session) -> None:
        """Tell the result and the live view, once, that the output file stopped short (a full
        disk, a quota, the output directory's cap); the output goes on in memory."""
        why = s.capture.stopped if s.capture is not None else None
        if why is None or why in s.notices:
            return
        log.warning("session %s: %s", s.id, why)
        s.notices.append(why)
        if s.live:
            # Sent now, past the live throttle (which may drop queued output, never this).
            if s.live_timer is not None:
                s.live_timer.cancel()
                s.live_timer = None
            self.flush_live(s)
            self.on_event("output", OutputChunk(s.id, f"\n[run_bash: {why}]\n"))

    def close_pipe(self, s: Session) -> None:
        if s.pipe_r >= 0:
            self.loop.remove_reader(s.pipe_r)
            os.close(s.pipe_r)
            s.pipe_r = -1
        s.pipe_eof.set()

    def _queue_live(self, s: Session, data: bytes) -> None:
        s.live_pending += data
        if len(s.live_pending) > 2 * LIVE_CHUNK_CHARS:
            skipped = len(s.live_pending) - LIVE_CHUNK_CHARS
            s.live_pending = (
                f"\n[… {skipped} bytes not shown live; see the output file …]\n".encode()
                + s.live_pending[-LIVE_CHUNK_CHARS:]
            )
        if s.live_timer is None:
            interval = self._config().output.live_interval_ms / 1000
            s.live_timer = self.loop.call_later(interval, self.flush_live, s)

    def flush_live(self, s: Session) -> None:
        s.live_timer = None
        data, s.live_pending = s.live_pending, b""
        if not data:
            return
        # Keep an incomplete UTF-8 sequence or line for the next flush while the command runs.
        if s.running and not s.pipe_eof.is_set():
            nl = data.rfind(b"\n")
            if 0 <= nl < len(data) - 1 and len(data) - nl < 4096:
                data, s.live_pending = data[: nl + 1], data[nl + 1 :]
        text = clean_text(data, self._config().output.max_line_chars)
        self.on_event("output", OutputChunk(s.id, text))
        if s.live_pending and s.live_timer is None:
            interval = self._config().output.live_interval_ms / 1000
            s.live_timer = self.loop.call_later(interval, self.flush_live, s)

    def watch(self, s: Session) -> LiveStart:
        """Turn on live output events for a session; return what was printed so far (bounded)."""
        s.live = True
        if s.capture is None:
            return LiveStart(**s.fields())
        if s.capture.removed:  # an old session whose file made room for newer output
            out_cfg = self._config().output
            text = s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars)
            return LiveStart(**s.fields(), data=text)
        # Output still queued for a live event is left out: the event will bring it.
        end = s.capture.total - len(s.live_pending)
        if s.capture.stopped is None:
            end = min(s.capture.written, end)
        data, _end = s.capture.last_lines(10_000, 4 * READ_PAGE_BYTES, end)
        max_line = self._config().output.max_line_chars
        return LiveStart(**s.fields(), data=clean_text(data, max_line))

    def output(
        self, s: Session, tail: object = None, max_bytes: int = READ_PAGE_BYTES
    ) -> OutputPage:
        """New output since the last read (bounded), or the last ``tail`` lines."""
        if s.capture is None:
            return OutputPage(**s.fields())
        out_cfg = self._config().output
        if s.capture.removed:  # an old session whose file made room for newer output
            text = s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars)
            return OutputPage(**s.fields(), output=text)
        if s.pipe_r >= 0:
            self.on_readable(s)  # include what is already in the pipe
        max_line = out_cfg.max_line_chars
        max_chars = out_cfg.max_chars
        if tail is not None:
            if isinstance(tail, bool) or not isinstance(tail, int) or tail <= 0:
                raise UsageError(f"tail should be a positive number of lines, not {tail!r}")
            data, end = s.capture.last_lines(tail, min(max_bytes, max_chars))
            s.read_offset = max(s.read_offset, end)
            return OutputPage(**s.fields(), output=clean_text(data, max_line))
        # A page is at most max_chars bytes, so cleaning never has to drop any of it: what is
        # not returned now stays unread for the next call.
        data, s.read_offset, left = s.capture.read(s.read_offset, min(max_bytes, max_chars))
        return OutputPage(**s.fields(), output=clean_text(data, max_line), unread_bytes=left)
