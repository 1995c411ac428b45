"""inotify, to skip the walk at a run's start when nothing changed since the last walk.

A Watcher holds one inotify instance per project, with a watch on every directory the last walk
covered (and each ``.git`` directory), added through ``/proc/self/fd/N`` so the watch lands on
the very inode the walk opened. Any event, an overflow or a failed watch makes the project
"dirty": the next start walks as usual. What inotify cannot see (writes through a shared
``mmap``, changes on a network file system made elsewhere) is caught by the walk that ends every
run, which is always a full walk; see the store's module docstring.

Non-blocking throughout: the instance is ``IN_NONBLOCK``; reading it never waits.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import struct
import threading

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK
)  # fmt: skip
EVENT = struct.Struct("iIII")  # wd, mask, cookie, len

_libc = None
_libc_lock = threading.Lock()


def _lib() -> ctypes.CDLL | None:
    global _libc
    with _libc_lock:
        if _libc is None:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
                lib.inotify_init1.argtypes = [ctypes.c_int]
                lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
                _libc = lib
            except (OSError, AttributeError):
                _libc = False  # type: ignore[assignment]
        return _libc or None


class Watcher:
    """Change detection for one project between two walks. Use under the project's lock."""

    def __init__(self) -> None:
        lib = _lib()
        self.fd = -1
        self.valid = False  # every covered directory is watched and nothing was lost
        self.gen = -1  # the snapshot generation the watches describe
        self._wds: dict[tuple[int, int], int] = {}
        self._by_wd: dict[int, tuple[int, int]] = {}
        self._failed = False
        if lib is None:
            return
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd >= 0:
            self.fd = fd

    @property
    def usable(self) -> bool:
        return self.fd >= 0

    def add(self, dir_fd: int) -> None:
        """Watch the directory open at ``dir_fd`` (once per inode)."""
        if self.fd < 0:
            return
        try:
            st = os.fstat(dir_fd)
        except OSError:
            self._failed = True
            return
        key = (st.st_dev, st.st_ino)
        if key in self._wds:
            return
        lib = _lib()
        wd = lib.inotify_add_watch(self.fd, f"/proc/self/fd/{dir_fd}".encode(), MASK) if lib else -1
        if wd < 0:
            self._failed = True  # ENOSPC (max_user_watches) or no /proc: walk every time
            return
        self._wds[key] = wd
        self._by_wd[wd] = key

    def begin_walk(self) -> None:
        """Forget pending events: the walk about to start sees what they announced. Until
        ``end_walk``, the watcher vouches for nothing (a walk that fails leaves it so)."""
        self.changed()
        self._failed = False
        self.valid = False
        self.gen = -1

    def end_walk(self, gen: int) -> None:
        """The walk that just ended is the state the watches now guard."""
        self.valid = self.fd >= 0 and not self._failed
        self.gen = gen

    def changed(self) -> bool:
        """Whether anything happened since the last walk (reads every pending event)."""
        if self.fd < 0:
            return True
        dirty = False
        while True:
            try:
                buf = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                break
            except OSError as err:
                if err.errno == errno.EINTR:
                    continue
                self.valid = False
                return True
            if not buf:
                break
            off = 0
            while off + EVENT.size <= len(buf):
                wd, mask, _cookie, n = EVENT.unpack_from(buf, off)
                off += EVENT.size + n
                dirty = True
                if mask & IN_Q_OVERFLOW:
                    self.valid = False
                if mask & IN_IGNORED:
                    key = self._by_wd.pop(wd, None)
                    if key is not None:
                        self._wds.pop(key, None)
        return dirty or not self.valid

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        self.valid = False
