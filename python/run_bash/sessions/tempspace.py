"""The run temp dirs: where they live, each run's own dir and its cap.

Each run gets a private temp dir (its ``TMPDIR``, and ``/tmp`` inside the sandbox) under one root on
a disk-backed filesystem (``statedir.make_temp_root``). A run whose dir grows past its cap
(``sandbox.limits.max_temp_size``, at most half the free space) is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping

from run_bash.config import Config
from run_bash.sessions.session import Session
from run_bash.statedir import MAX_TEMP_ENTRIES, dir_usage, free_bytes, human_size, make_temp_root

# How often the run temp dirs are checked against their cap (a statvfs); a walk of the temp dirs
# happens when the disk's free space fell by more than the smallest headroom left, or after
# TEMP_WALK_S anyway. A writer at page-cache speed (~3 GB/s) gets ~150 MB past the cap per tick.
TEMP_CHECK_S = 0.05
TEMP_WALK_S = 5.0

log = logging.getLogger("run_bash")


class TempSpace:
    """The temp dirs of one host's runs and the check of their caps.

    ``sessions()`` gives the host's sessions now; ``stop(s)`` ends a run that went over its cap.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        environ: Mapping[str, str],
        sessions: Callable[[], Iterable[Session]],
        stop: Callable[[Session], None],
        root: str | None = None,
    ) -> None:
        self.loop = loop
        self.environ = environ
        self._sessions = sessions
        self._stop = stop
        # On a disk-backed filesystem (statedir.py); created on the first run.
        self._root = root
        self._timer: asyncio.TimerHandle | None = None
        self._walk: asyncio.Future[None] | None = None
        self._free = -1  # free bytes at the last walk
        self._walked = 0.0

    @property
    def root(self) -> str:
        """The directory holding the run temp dirs (created on first use)."""
        if self._root is None:
            self._root = make_temp_root(self.environ)
        return self._root

    def make(self, s: Session, config: Config) -> None:
        """Give run ``s`` its temp dir and its cap."""
        s.tmpdir = tempfile.mkdtemp(prefix=f"tmp-{s.id}-", dir=self.root)
        s.temp_cap = min(config.sandbox.limits.max_temp_size, free_bytes(self.root) // 2)

    def schedule(self) -> None:
        if self._timer is None and any(x.running and x.tmpdir for x in self._sessions()):
            self._timer = self.loop.call_later(TEMP_CHECK_S, self._check)

    def _check(self) -> None:
        """Stop any run whose temp dir grew past its cap. The walk (in a thread) runs only when the
        temp filesystem lost more free space than the smallest headroom left, or every
        ``TEMP_WALK_S``: a run cannot pass its cap without the free space dropping by as much."""
        self._timer = None
        runs = [x for x in self._sessions() if x.running and x.tmpdir and x.launched]
        if not runs or self._walk is not None:
            self.schedule()
            return
        free = free_bytes(self.root)
        # Space freed since the walk (a run ended, files were removed) raises the baseline, so it
        # can never hide what is written after it.
        self._free = max(self._free, free) if self._free >= 0 else -1
        headroom = min(x.temp_cap - x.temp_used for x in runs)
        due = time.monotonic() - self._walked >= TEMP_WALK_S
        if self._free >= 0 and self._free - free < headroom and not due:
            self.schedule()
            return
        self._free = free
        self._walked = time.monotonic()
        self._walk = asyncio.ensure_future(self._walk_temp(runs), loop=self.loop)

    async def _walk_temp(self, runs: list[Session]) -> None:
        try:
            for x in runs:
                used, partial = await self.loop.run_in_executor(None, dir_usage, x.tmpdir)
                x.temp_used = used
                if x.running and (used > x.temp_cap or partial):
                    self._over_cap(x, used, partial)
        finally:
            self._walk = None
            self.schedule()

    def _over_cap(self, s: Session, used: int, partial: bool) -> None:
        if partial:
            why = (
                "stopped: its temp dir (TMPDIR) could not be measured in full (over "
                f"{MAX_TEMP_ENTRIES} entries, too deep, or unreadable) against its cap of "
                f"{human_size(s.temp_cap)}; the files are removed"
            )
        else:
            why = (
                f"stopped: its temp dir (TMPDIR) held {human_size(used)}, over its cap of "
                f"{human_size(s.temp_cap)} (sandbox.limits.max_temp_size, at most half the free "
                "disk space); the files are removed"
            )
        s.notices.append(why)
        log.warning("session %s: temp dir over its cap (%d > %d bytes)", s.id, used, s.temp_cap)
        self._stop(s)

    def close(self) -> None:
        """Stop checking and remove every run temp dir."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
