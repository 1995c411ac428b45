"""One thing made ahead of the run that takes it (``output.ReadyFile``: the run's output file;
``sessions/tempspace.py``: its temp dir).

Making a file or a directory is a metadata write (0.12-0.17 ms here, more on a busy disk):
``refill`` does it on a worker after a run's result, and the next run only takes it. The owner
checks what it takes (an unsandboxed run can reach where it lies) and drops what is no longer as
made. Nothing is made once closed, and what waits is dropped then.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class MadeAhead(Generic[T]):
    def __init__(self, make: Callable[[], T], drop: Callable[[T], None]) -> None:
        """``make`` makes one (OSError: none this time); ``drop`` removes one."""
        self._make = make
        self._drop = drop
        self._lock = threading.Lock()
        self._ready: T | None = None
        self._closed = False

    def refill(self) -> None:
        """Make one when none waits (a worker; never raises an OSError)."""
        with self._lock:
            if self._ready is not None or self._closed:
                return
        try:
            made = self._make()
        except OSError:
            return
        with self._lock:
            if self._ready is None and not self._closed:
                self._ready = made
                return
        self._drop(made)

    def take(self) -> T | None:
        """The one that waits, now the caller's (to check, and ``drop`` when it is not as
        made); None when none does."""
        with self._lock:
            ready, self._ready = self._ready, None
        return ready

    def drop(self, made: T) -> None:
        self._drop(made)

    def close(self) -> None:
        """Make nothing more; drop what waits."""
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, None
        if ready is not None:
            self._drop(ready)
