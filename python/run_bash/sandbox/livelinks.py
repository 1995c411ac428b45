"""Links (and repositories) a background run makes, judged as it makes them.

The post-run check (``guard.py``, ``linkcheck.py``) judges the links a run leaves when it ends.
A background session (``bg_after``: a server, a watcher) gives its first result and goes on
running while the chat goes on: a link it makes meanwhile (``notes.md`` -> ``~/.ssh/id_rsa``)
would be followed by CodeCompanion's ``read_file`` or your editor long before the run ends. So
from the moment a run goes on in the background, the tree scan's inotify instance (which watches
every directory of the trees a run can write, ``treescan.py``) wakes this thread at every change
there, and the guard judges the links that appeared then, and the new repositories (whose git
directories are then watched for writes too: a config armed later wakes it as well): one that
leads out, or is not inert, is moved to the quarantine and the run is stopped (it could make it
again at once). A tree inotify cannot watch (more than ``treescan.MAX_WATCHED_DIRS``
directories, a network file system) is judged when the run ends.

The same thread serves every run while it goes on, background or not, for one cheaper look: a
file of a name kept at every level of its trees (``keptnames.EVERY_LEVEL_MEMBERS``, a relative PATH
entry's directory) that it made anywhere stops it at once, as a member of the host-read set that
appears does (``guard.Keeper._named_appeared``). Looks are spaced by a multiple of what the last
one took (``GAP_FACTOR``): a build that changes its tree all the time gets a share of one core.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable

log = logging.getLogger("run_bash")

# Between two looks, at least this many times what the last one took (within these bounds): a
# build that changes its tree all the time makes the walks a share of one core, not all of it.
GAP_FACTOR = 4.0
MIN_GAP_S = 0.05
MAX_GAP_S = 1.0
# How long the thread waits, with nothing to watch, for the next run before it ends.
IDLE_S = 30.0


class LiveLinks:
    """One thread per host while a background run is watched: it waits on ``events_fd()`` (the
    tree scan's inotify descriptor) and calls ``judge()`` at every wake; ``judge`` walks the
    trees (which reads the events) and returns whether any run is still watched (else the thread
    waits ``IDLE_S`` for the next ``start``, then ends, and ``start`` begins another one)."""

    def __init__(self, events_fd: Callable[[], int | None], judge: Callable[[], bool]) -> None:
        self._events_fd = events_fd
        self._judge = judge
        self._lock = threading.Lock()
        self._closing = threading.Event()  # ends a gap between two looks at once
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._closed = False
        self._pending = False

    def start(self) -> None:
        """A run is now watched: judge at once, then at every change (never blocks)."""
        with self._lock:
            if self._closed:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="run_bash-live-links", daemon=True
                )
                self._thread.start()
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def poke(self) -> None:
        """Events of the watched trees were read by another caller of the tree scan (a policy
        computed meanwhile, another run's check): ``events_fd`` will not wake the thread for
        them, so this does, when one runs (it never starts one, never blocks)."""
        with self._lock:
            if self._closed or self._thread is None:
                return
            if self._thread is threading.current_thread():
                return  # its own look read them, and judged what they said
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def again(self) -> None:
        """The look going on (``judge``) read changes it may have seen only in part: the next
        look comes after the usual gap, whatever thread asks (never blocks)."""
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")

    def close(self) -> None:
        """The host is exiting: the thread ends (and closes the wake pipe; now, if none runs)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing.set()
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"x")
            if self._thread is None:
                self._close_pipe()

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _idle(self) -> bool:
        """Wait up to ``IDLE_S`` for a run to watch (or the host's exit); True when none came
        and the thread is to end (it is forgotten: the next ``start`` begins another)."""
        deadline = time.monotonic() + IDLE_S
        while True:
            woke = False
            left = deadline - time.monotonic()
            if left > 0:
                try:
                    woke = bool(select.select([self._wake_r], [], [], left)[0])
                except (OSError, ValueError):
                    woke = False
                if woke:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
            with self._lock:
                if self._pending or self._closed:
                    return False
                if not woke:
                    self._thread = None
                    return True

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    self._thread = None
                    self._close_pipe()
                    return
                self._pending = False
            began = time.monotonic()
            try:
                watched = self._judge()
            except Exception:  # the post-run check judges what is left
                log.exception("judging the links of background runs failed")
                watched = False
            took = time.monotonic() - began
            if not watched:
                # Nothing to watch: the thread waits a while for the next run before it ends
                # (starting one is on that run's way, and commands come in bursts).
                if self._idle():
                    return
                continue
            self._closing.wait(min(MAX_GAP_S, max(MIN_GAP_S, GAP_FACTOR * took)))
            fd = self._events_fd()
            try:
                select.select([self._wake_r] + ([fd] if fd is not None else []), [], [])
            except (OSError, ValueError):
                pass  # the descriptor was closed meanwhile: ask for the current one
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 4096)
