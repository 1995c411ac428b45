"""Just enough inotify for run_bash (ctypes, no dependency): the guard's watches on the host-read
set and the change store's watches on a project's directories share this one binding."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import struct

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
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_MASK_ADD = 0x20000000
IN_ISDIR = 0x40000000

# Entries of a directory came or went; the file itself changed.
ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
CONTENT = IN_MODIFY | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF

EVENT = struct.Struct("iIII")  # wd, mask, cookie, len

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]

# Filesystems changed only through this kernel, where inotify sees every change: ext2/3/4, xfs,
# btrfs, tmpfs, f2fs, zfs, bcachefs, reiserfs, jfs and overlayfs (a container's layers below it
# do not change). Not: network and FUSE filesystems (changed elsewhere), proc and sysfs.
LOCAL_FS = frozenset(
    {
        0xEF53,
        0x58465342,
        0x9123683E,
        0x01021994,
        0xF2F52010,
        0x2FC12FC1,
        0xCA451A4E,
        0x52654973,
        0x3153464A,
        0x794C7630,
    }
)


OVERLAYFS = 0x794C7630


def fs_type(path: str) -> int | None:
    """The magic number of the filesystem holding ``path`` (``statfs``); None when unknown."""
    buf = ctypes.create_string_buffer(256)
    if _libc.statfs(os.fsencode(path), buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value


def sees_every_change(path: str) -> bool:
    """Whether inotify sees every change of the filesystem holding ``path`` (``LOCAL_FS``)."""
    return fs_type(path) in LOCAL_FS


class Inotify:
    """One inotify instance, non-blocking: ``read`` never waits. Raises OSError when the kernel
    refuses an instance (``fs.inotify.max_user_instances``)."""

    def __init__(self) -> None:
        fd = _libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        self.fd: int = fd

    @classmethod
    def adopt(cls, fd: int) -> Inotify:
        """The instance ``fd`` (received from another process, with its watches); made
        non-blocking."""
        self = cls.__new__(cls)
        os.set_blocking(fd, False)
        self.fd = fd
        return self

    def add(self, path: str, mask: int) -> int:
        """A watch on ``path`` (a ``/proc/self/fd/N`` path watches that very inode); its wd.
        Raises OSError (``ENOSPC``: ``fs.inotify.max_user_watches``)."""
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return int(wd)

    def remove(self, wd: int) -> None:
        _libc.inotify_rm_watch(self.fd, wd)

    def read(self) -> list[tuple[int, int, str]]:
        """Every queued event as (wd, mask, name); raises OSError when reading fails."""
        out: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            except OSError as err:
                if err.errno == errno.EINTR:
                    continue
                raise
            if not data:
                return out
            off = 0
            while off + EVENT.size <= len(data):
                wd, mask, _cookie, size = EVENT.unpack_from(data, off)
                raw = data[off + EVENT.size : off + EVENT.size + size].split(b"\0", 1)[0]
                out.append((wd, mask, os.fsdecode(raw)))
                off += EVENT.size + size

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
