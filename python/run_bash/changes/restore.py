"""Writes into the project for undo, each one confined to the project.

Every operation resolves its path one component at a time from the project's directory fd with
``O_NOFOLLOW|O_DIRECTORY``: a component that is a symlink (for instance a directory the run
replaced with a link to somewhere outside) stops the operation with ``Unsafe``, so nothing is ever
written, removed or chmod'ed outside the project. Files are written to a temp name beside the
target and renamed over it (``renameat`` replaces the name, never follows it).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Callable
from typing import Any

from .objects import digest
from .snapshot import DIR_FLAGS, KIND, Entry, _stat_entry, open_regular, same_state, stat_key

TEMP_PREFIX = ".run_bash-undo-"


class Unsafe(Exception):
    """The path cannot be reached without leaving the project or following a symlink."""


class Changed(Exception):
    """The path is no longer what undo checked: it was left as it is."""


def _matches(now: Entry | None, expect: Entry) -> bool:
    """Whether a file renamed aside is still ``expect``: by content when both keep it, else by
    inode, size, mode and mtime (a rename changes the ctime)."""
    if now is None:
        return False
    if now[KIND] in "fl" and expect[KIND] == now[KIND]:
        return same_state(now, expect)
    a, b = stat_key(now), stat_key(expect)
    return (a[0], a[1], a[2], a[4]) == (b[0], b[1], b[2], b[4])


class Tree:
    """The project, open as a directory fd."""

    def __init__(self, root_fd: int, max_file_size: int) -> None:
        self.root_fd = root_fd
        self.max_file_size = max_file_size

    def _parent(self, path: str, create: bool = False, reading: bool = False) -> tuple[int, str]:
        """An fd of ``path``'s parent directory (the caller closes it) and the last component.

        A parent that is a symlink raises Unsafe, or FileNotFoundError when ``reading`` (the path
        does not exist in the project's own namespace); a parent that is a file raises
        NotADirectoryError."""
        parts = path.split("/")
        fd = os.dup(self.root_fd)
        try:
            for i, part in enumerate(parts[:-1]):
                try:
                    nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    nfd = _open_dir(fd, part, "/".join(parts[: i + 1]))
                except OSError as err:
                    if err.errno in (errno.ELOOP, errno.ENOTDIR):
                        where = "/".join(parts[: i + 1])
                        st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                        if stat.S_ISLNK(st.st_mode) and reading:
                            raise FileNotFoundError(errno.ENOENT, f"{where} is a symlink") from None
                        if stat.S_ISLNK(st.st_mode):
                            raise Unsafe(f"{where} is a symlink, not a directory") from None
                        raise NotADirectoryError(
                            errno.ENOTDIR, f"{where} is not a directory"
                        ) from None
                    raise
                os.close(fd)
                fd = nfd
            return fd, parts[-1]
        except BaseException:
            os.close(fd)
            raise

    def current(self, path: str) -> Entry | None:
        """What ``path`` is now, in snapshot form (files are hashed, not stored); None when absent.

        A path under a symlink or a file is absent: the walk that made the snapshot never
        follows a symlink either."""
        if self.root_fd < 0:
            return None
        try:
            pfd, name = self._parent(path, reading=True)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            fmt = stat.S_IFMT(st.st_mode)
            if fmt == stat.S_IFDIR:
                return ("d", stat.S_IMODE(st.st_mode), 0, st.st_mtime_ns, st.st_ctime_ns,
                        st.st_ino, None, False)  # fmt: skip
            if fmt == stat.S_IFLNK:
                return _stat_entry("l", st, os.readlink(name, dir_fd=pfd))
            if fmt != stat.S_IFREG:
                return _stat_entry("s", st)
            if st.st_size > self.max_file_size:
                return _stat_entry("b", st)
            try:
                got = open_regular(pfd, name)
            except PermissionError as err:
                return _stat_entry("u", st, f"unreadable ({err.strerror})")
            if got is None:
                return _stat_entry("u", st, "changing while read")
            return _file_entry(*got)
        finally:
            os.close(pfd)

    def remove(self, path: str, expect: Entry | None = None) -> None:
        """Remove a file, symlink, special file or empty directory (never a directory's content).

        With ``expect``, a file is removed only if it is still that: it is renamed aside first
        and checked there, so nothing written to it after the check can be lost; otherwise it
        is put back and Changed is raised."""
        pfd, name = self._parent(path)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=pfd)
            elif expect is None:
                os.unlink(name, dir_fd=pfd)
            else:
                os.unlink(self._aside(pfd, name, expect), dir_fd=pfd)
        finally:
            os.close(pfd)

    def _aside(self, pfd: int, name: str, expect: Entry) -> str:
        """Rename ``name`` to a temp name and check it is ``expect`` there; the temp name, or
        Changed (after renaming it back)."""
        tmp = _temp_name(pfd)
        os.rename(name, tmp, src_dir_fd=pfd, dst_dir_fd=pfd)
        if _matches(self._entry_at(pfd, tmp), expect):
            return tmp
        with contextlib.suppress(OSError):  # a new file took the name meanwhile: keep both
            _rename_noreplace(pfd, tmp, name)
        raise Changed(f"{name} changed while it was being undone")

    def _entry_at(self, pfd: int, name: str) -> Entry | None:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        fmt = stat.S_IFMT(st.st_mode)
        if fmt == stat.S_IFLNK:
            return _stat_entry("l", st, os.readlink(name, dir_fd=pfd))
        if fmt != stat.S_IFREG or st.st_size > self.max_file_size:
            return _stat_entry("s" if fmt != stat.S_IFREG else "b", st)
        try:
            got = open_regular(pfd, name)
        except PermissionError:
            return _stat_entry("u", st)
        if got is None:
            return _stat_entry("u", st)
        return _file_entry(*got)

    def write_file(self, path: str, data: bytes, mode: int, expect: Entry | None = None) -> None:
        """Write ``path`` (through a temp file renamed into place). With ``expect``, a file now
        at ``path`` is replaced only if it is still that (see ``remove``); without, only if
        nothing is there (Changed otherwise)."""

        def make(pfd: int, tmp: str) -> None:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600, dir_fd=pfd)  # fmt: skip
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)

        self._put(path, make, expect)

    def symlink(self, path: str, target: str, expect: Entry | None = None) -> None:
        """Make ``path`` a symlink to ``target``; what is there now is handled as by
        ``write_file``."""
        self._put(path, lambda pfd, tmp: os.symlink(target, tmp, dir_fd=pfd), expect)

    def _put(self, path: str, make: Callable[[int, str], None], expect: Entry | None) -> None:
        """Make a temp name beside ``path`` (``make``) and rename it into place: over what is
        there only after it was renamed aside and found to be ``expect``; with no ``expect``,
        never over anything (a file made there meanwhile stays, and Changed is raised)."""
        pfd, name = self._parent(path, create=True)
        aside = None
        try:
            if expect is not None and expect[KIND] != "d":
                with contextlib.suppress(FileNotFoundError):
                    aside = self._aside(pfd, name, expect)
            tmp = _temp_name(pfd)
            try:
                make(pfd, tmp)
                _place(pfd, tmp, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=pfd)
                if aside is not None:
                    with contextlib.suppress(OSError):  # never over a file made meanwhile
                        _rename_noreplace(pfd, aside, name)
                    aside = None
                raise
            if aside is not None:
                with contextlib.suppress(OSError):
                    os.unlink(aside, dir_fd=pfd)
        finally:
            os.close(pfd)

    def mkdir(self, path: str, mode: int) -> None:
        """Make ``path`` a directory (owner-writable until ``chmod_dir`` sets its mode)."""
        pfd, name = self._parent(path, create=True)
        try:
            try:
                os.mkdir(name, 0o700, dir_fd=pfd)
            except FileExistsError:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise
            fd = _open_dir(pfd, name, path)
            try:
                os.fchmod(fd, (stat.S_IMODE(os.fstat(fd).st_mode) | 0o700) & 0o7777)
            finally:
                os.close(fd)
        finally:
            os.close(pfd)

    def chmod_dir(self, path: str, mode: int) -> None:
        pfd, name = self._parent(path)
        try:
            fd = _open_dir(pfd, name, path)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        finally:
            os.close(pfd)


def _open_dir(pfd: int, name: str, path: str) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=pfd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Unsafe(f"{path} is not a directory (a symlink or a file)") from None
        raise


def _temp_name(pfd: int) -> str:
    while True:
        name = TEMP_PREFIX + os.urandom(6).hex()
        try:
            os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return name


_RENAME_NOREPLACE = 1
_renameat2: Any = None


def _place(pfd: int, tmp: str, name: str) -> None:
    """Rename ``tmp`` to ``name`` only if nothing is at ``name`` (an empty directory in the way
    is removed first); Changed when something is: it is never replaced. ``renameat2`` with
    ``RENAME_NOREPLACE``, else a hard link and an unlink (which never replace either)."""
    for _ in range(2):
        try:
            _rename_noreplace(pfd, tmp, name)
            return
        except FileExistsError:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                break
            try:
                os.rmdir(name, dir_fd=pfd)
            except OSError:
                break
    raise Changed(f"{name} was made while it was being undone")


def _rename_noreplace(pfd: int, tmp: str, name: str) -> None:
    """Rename ``tmp`` to ``name`` in ``pfd``; FileExistsError when something is at ``name``."""
    global _renameat2
    if _renameat2 is None:  # loaded on first use, by whichever caller comes first
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]  # fmt: skip
            _renameat2 = fn
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2:
        if _renameat2(pfd, os.fsencode(tmp), pfd, os.fsencode(name), _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), name)
    os.link(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd, follow_symlinks=False)
    os.unlink(tmp, dir_fd=pfd)


def _file_entry(fd: int, fst: os.stat_result) -> Entry:
    """The entry of the regular file open at ``fd`` (``open_regular``'s answer); closes ``fd``."""
    try:
        data = os.read(fd, fst.st_size + 1)
    finally:
        os.close(fd)
    return ("f", stat.S_IMODE(fst.st_mode), len(data), fst.st_mtime_ns, fst.st_ctime_ns,
            fst.st_ino, digest(data), False)  # fmt: skip
