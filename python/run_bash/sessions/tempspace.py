"""The run temp dirs: where they live and each run's own dir.

Each run gets a private temp dir under one root (``statedir.make_temp_root``). A confining backend
mounts the run's temp space on it inside the run's own mount namespace (a size-limited tmpfs,
``sandbox/tempfs.py``: the kernel enforces ``sandbox.limits.max_temp_size``) and binds it on
``/tmp``, ``/var/tmp`` and ``/dev/shm``; on the host it stays an empty directory, removed when the
run ends. A run without a sandbox uses the directory itself as its ``TMPDIR`` (uncapped: such a
command can write anywhere the user can).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping

from run_bash.sessions.session import Session
from run_bash.statedir import make_temp_root


class TempSpace:
    """The temp dirs of one host's runs."""

    def __init__(self, environ: Mapping[str, str], root: str | None = None) -> None:
        self.environ = environ
        # On a disk-backed filesystem (statedir.py); created on the first run.
        self._root = root
        # One temp dir made ahead of the run that takes it (``refill``, ``make``).
        self._lock = threading.Lock()
        self._ready: str | None = None
        self._closed = False

    @property
    def root(self) -> str:
        """The directory holding the run temp dirs (created on first use)."""
        if self._root is None:
            self._root = make_temp_root(self.environ)
        return self._root

    def make(self, s: Session) -> None:
        """Give run ``s`` its temp dir: the one made ahead when it is still as made (an empty
        directory of this host's: an unsandboxed run can reach the root), else a new one."""
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None:
            try:
                st = os.lstat(ready)
                if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                    with os.scandir(ready) as entries:
                        empty = next(entries, None) is None
                    if empty and stat.S_IMODE(st.st_mode) == 0o700:
                        s.tmpdir = ready
                        return
            except OSError:
                pass
            shutil.rmtree(ready, ignore_errors=True)
        s.tmpdir = self.make_dir(s.id)

    def refill(self) -> None:
        """Make the next run's temp dir when none is ready (a worker, after a run's result:
        making a directory is a metadata write the next run need not wait for). Never raises."""
        with self._lock:
            if self._ready is not None or self._closed:
                return
        try:
            made = self.make_dir("run")
        except OSError:
            return
        with self._lock:
            if self._ready is None and not self._closed:
                self._ready = made
                return
        shutil.rmtree(made, ignore_errors=True)

    def make_dir(self, name: str) -> str:
        """A new temp dir for run ``name`` (a session, or a prepared sandbox)."""
        return tempfile.mkdtemp(prefix=f"tmp-{name}-", dir=self.root)

    def close(self) -> None:
        """Remove every run temp dir."""
        with self._lock:
            self._closed, self._ready = True, None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
