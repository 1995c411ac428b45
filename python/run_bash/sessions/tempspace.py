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
from collections.abc import Mapping

from run_bash.ahead import MadeAhead
from run_bash.sessions.session import Session
from run_bash.statedir import make_temp_root


class TempSpace:
    """The temp dirs of one host's runs."""

    def __init__(self, environ: Mapping[str, str], root: str | None = None) -> None:
        self.environ = environ
        # On a disk-backed filesystem (statedir.py); created on the first run.
        self._root = root
        # One temp dir made ahead of the run that takes it (``refill``, ``make``).
        self._ahead: MadeAhead[str] = MadeAhead(
            lambda: self.make_dir("run"), lambda d: shutil.rmtree(d, ignore_errors=True)
        )

    @property
    def root(self) -> str:
        """The directory holding the run temp dirs (created on first use)."""
        if self._root is None:
            self._root = make_temp_root(self.environ)
        return self._root

    def make(self, s: Session) -> None:
        """Give run ``s`` its temp dir: the one made ahead when it is still as made (an empty
        directory of this host's: an unsandboxed run can reach the root), else a new one."""
        ready = self._ahead.take()
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
            self._ahead.drop(ready)
        s.tmpdir = self.make_dir(s.id)

    def refill(self) -> None:
        """Make the next run's temp dir when none is ready (a worker, after a run's result:
        making a directory is a metadata write the next run need not wait for). Never raises."""
        self._ahead.refill()

    def make_dir(self, name: str) -> str:
        """A new temp dir for run ``name`` (a session, or a prepared sandbox)."""
        return tempfile.mkdtemp(prefix=f"tmp-{name}-", dir=self.root)

    def close(self) -> None:
        """Remove every run temp dir."""
        self._ahead.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
