"""The protected-file guard: keeps project files that run later outside the sandbox unchanged.

Backend-neutral: any backend that cannot make a protected path read-only by itself (sandlock, for
every protected path; bubblewrap, for the ones that do not exist yet) starts one per run.

Before the run: a snapshot of every protected path and the identity (device, inode) of every guarded
``.git`` directory. While it runs: an inotify watcher on those paths and their parents; any event
makes it compare with the snapshot, and on a difference it kills the run first (so nothing can race
the repair) and then restores. After the run: one last comparison. Restores are reported as notices.
The limit: a change exists on disk for the few milliseconds between the write and the restore.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import stat
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from run_bash.sandbox.policy import Policy

MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024


def _read_small(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_SNAPSHOT_BYTES else None


def _state(path: str) -> Any:
    """A comparable description of ``path``: None (absent), ("file", mode, bytes), ("link",
    target), ("dir", mode, {name: state}) or ("other", mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return ("unreadable",)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        data = _read_small(path)
        if data is None:  # too large or unreadable: compare by size and mtime, cannot restore
            return ("file", mode, (st.st_size, st.st_mtime_ns))
        return ("file", mode, data)
    if stat.S_ISDIR(st.st_mode):
        try:
            names = sorted(os.listdir(path))[:200]
        except OSError:
            names = []
        return ("dir", mode, {n: _state(os.path.join(path, n)) for n in names})
    return ("other", mode)


def _write_state(path: str, state: Any) -> None:
    """Recreate ``state`` at ``path`` (removing whatever is there)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    if state is None:
        return
    kind = state[0]
    if kind == "file" and isinstance(state[2], bytes):
        tmp = f"{path}.run_bash-restore"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, state[1])
        try:
            os.write(fd, state[2])
            os.fchmod(fd, state[1])
        finally:
            os.close(fd)
        os.replace(tmp, path)
    elif kind == "link":
        os.symlink(state[1], path)
    elif kind == "dir":
        os.mkdir(path, state[1])
        for name, sub in state[2].items():
            _write_state(os.path.join(path, name), sub)


class Inotify:
    """Just enough inotify for the guard (ctypes; no dependency)."""

    IN_MODIFY = 0x2
    IN_ATTRIB = 0x4
    IN_CLOSE_WRITE = 0x8
    IN_MOVED_FROM = 0x40
    IN_MOVED_TO = 0x80
    IN_CREATE = 0x100
    IN_DELETE = 0x200
    IN_DELETE_SELF = 0x400
    IN_MOVE_SELF = 0x800
    ALL = 0xFFE
    _libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self) -> None:
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.fd = fd

    def watch(self, path: str, mask: int = ALL) -> bool:
        return self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask) >= 0

    def drain(self) -> bool:
        got = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return got
            except OSError:
                return got
            if not data:
                return got
            got = True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class ProtectedFileGuard:
    """Keeps the protected project files of one run unchanged.

    Before the run: a snapshot of every protected path and the identity (device, inode) of every
    guarded ``.git`` directory. While it runs: an inotify watcher on those paths and their parents;
    any event makes it compare with the snapshot, and on a difference it kills the run first (so
    nothing can race the repair) and then restores. After the run: one last comparison.
    """

    def __init__(self, policy: Policy, kill: Callable[[], None] | None = None) -> None:
        self.paths = [p for p in policy.protected]
        self.git_dirs = list(policy.git_dirs)
        # Stops the whole run; the run this guard belongs to sets it (``LaunchedBase``).
        self.kill = kill
        self.snapshot = {p: _state(p) for p in self.paths}
        self.identity: dict[str, tuple[int, int]] = {}
        for g in self.git_dirs:
            with contextlib.suppress(OSError):
                st = os.lstat(g)
                self.identity[g] = (st.st_dev, st.st_ino)
        self.notices: list[str] = []
        self.tripped = False
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: threading.Thread | None = None
        self._ino: Inotify | None = None
        self._stopped = False

    def start(self) -> None:
        try:
            ino = Inotify()
        except OSError as e:
            self.notices.append(
                f"protected files are only checked after the run (inotify: {e.strerror or e}; "
                "see fs.inotify.max_user_instances)"
            )
            return
        parents: set[str] = set()
        for p in self.paths:
            parents.add(os.path.dirname(p))
            if os.path.lexists(p):
                ino.watch(p)
                if os.path.isdir(p) and not os.path.islink(p):
                    with contextlib.suppress(OSError):
                        for name in os.listdir(p)[:200]:
                            ino.watch(os.path.join(p, name))
        for g in self.git_dirs:
            parents.add(os.path.dirname(g))
            ino.watch(g, Inotify.IN_MOVE_SELF | Inotify.IN_DELETE_SELF | Inotify.IN_CREATE)
        for d in parents:
            if os.path.isdir(d):
                ino.watch(d, Inotify.ALL)
        self._ino = ino
        self._thread = threading.Thread(target=self._run, name="run_bash-guard", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._ino is not None
        try:
            while True:
                try:
                    ready, _, _ = select.select([self._ino.fd, self._stop_r], [], [])
                except (OSError, ValueError):
                    return
                if self._stop_r in ready:
                    return
                if self._ino.drain():
                    self.check(live=True)
        finally:
            # Closing an inotify fd waits for an RCU grace period (milliseconds): done here, off
            # the caller's path.
            self._ino.close()
            with contextlib.suppress(OSError):
                os.close(self._stop_r)

    def changed(self) -> list[str]:
        out = [p for p in self.paths if _state(p) != self.snapshot[p]]
        for g, ident in self.identity.items():
            try:
                st = os.lstat(g)
                now: tuple[int, int] | None = (st.st_dev, st.st_ino)
            except OSError:
                now = None
            if now != ident:
                out.append(g)
        return out

    def check(self, live: bool = False) -> None:
        with self._lock:
            bad = self.changed()
            if not bad:
                return
            if live:
                self.tripped = True
                if self.kill is not None:
                    self.kill()
            self._restore(bad)

    def _restore(self, bad: list[str]) -> None:
        for g in [b for b in bad if b in self.identity]:
            self._restore_git_dir(g)
        for p in [b for b in self.paths if _state(b) != self.snapshot[b]]:
            try:
                _write_state(p, self.snapshot[p])
                what = "restored"
            except OSError as e:
                what = f"could not be restored ({e.strerror})"
            rel = os.path.basename(os.path.dirname(p)) + "/" + os.path.basename(p)
            self.notices.append(
                f"protected file {rel} was changed inside the sandbox; {what}"
                + ("; the run was stopped" if self.tripped else "")
            )

    def _restore_git_dir(self, g: str) -> None:
        """Put the original ``.git`` directory (found by inode) back under its name."""
        dev, ino = self.identity[g]
        parent = os.path.dirname(g)
        found = None
        for root, dirs, _files in os.walk(parent):
            for d in list(dirs):
                full = os.path.join(root, d)
                with contextlib.suppress(OSError):
                    st = os.lstat(full)
                    if (st.st_dev, st.st_ino) == (dev, ino):
                        found = full
                        break
            if found or root.count(os.sep) - parent.count(os.sep) > 3:
                dirs[:] = []
            if found:
                break
        if found == g:
            return
        if os.path.lexists(g):
            aside = f"{g}.run_bash-replaced-{int(time.time())}"
            with contextlib.suppress(OSError):
                os.rename(g, aside)
        if found:
            with contextlib.suppress(OSError):
                os.rename(found, g)
        self.notices.append(
            f"{os.path.basename(g)} directory was moved or replaced inside the sandbox; "
            + ("moved back" if found else "the original was not found")
        )

    def finish(self, notices: list[str]) -> None:
        """Stop watching, check one last time and add what was found to ``notices``."""
        self.stop()
        self.check()
        notices.extend(n for n in self.notices if n not in notices)

    def stop(self) -> None:
        """Stop watching. The watcher thread closes its own descriptors as it exits."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        with contextlib.suppress(OSError):
            os.close(self._stop_w)
        if self._thread is None:
            with contextlib.suppress(OSError):
                os.close(self._stop_r)
