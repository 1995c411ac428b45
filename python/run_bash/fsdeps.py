"""What a computation read from the file system, and whether it would read the same now.

``recording()`` notes, for the thread that runs a computation, the metadata of everything it looked
at through ``os``: each path it stat'ed or lstat'ed, listed, opened, read a link of or checked
access to (``os.path``, ``glob`` and ``os.walk`` go through these), and each entry a listing by
``os.scandir`` yielded (its type and metadata are read through the entry). ``Reads.still()`` looks at
each again: the same signature (inode, type, mode, size, change and modification times) means the
computation would see the same: writing a file or adding, removing or renaming an entry of a
directory moves its change time, which user space cannot set back. Two changes within one
timestamp tick can look like one, so a recording that saw a change time younger than
``SETTLED_NS`` is never reused. Anything the recording cannot vouch for (a call relative to a
directory descriptor, a descriptor given for a path) makes it never reusable.

Parts that keep their own proof of freshness (the tree scan's inotify watches) read unrecorded
(``unrecorded()``) and add a check instead (``add_check``).

While a recording runs, ``os.stat``, ``os.lstat``, ``os.listdir``, ``os.scandir``, ``os.open``,
``os.readlink`` and ``os.access`` are wrapped (for every thread; only the recording thread's calls
are noted), and put back when no recording is left.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# A change time younger than this when recorded makes the recording not reusable.
SETTLED_NS = 2_000_000_000

Sig = tuple[Any, ...]

_tls = threading.local()
_lock = threading.Lock()
_active = 0
_original: dict[str, Any] = {}
# The calls themselves, never the wrappers.
_STAT, _LSTAT = os.stat, os.lstat


def sig_of(path: str | bytes, follow: bool, full: bool = True) -> Sig:
    """The signature of ``path`` now (``follow``: of what a symlink leads to). A directory
    looked at without being listed or opened (``full`` false: a stat, as ``realpath`` does for
    each parent) is its identity, mode and owner: its times move with every entry added
    anywhere in it, which a stat of it does not read."""
    try:
        st = _STAT(path) if follow else _LSTAT(path)
    except OSError as e:
        return ("E", e.errno)
    if not full and stat.S_ISDIR(st.st_mode):
        return ("D", st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Reads:
    """What one computation read (see the module docstring)."""

    def __init__(self) -> None:
        self.sigs: dict[tuple[str | bytes, bool, bool], Sig] = {}
        self.checks: list[Callable[[], bool]] = []
        self.usable = True
        self.started_ns = time.time_ns()

    def note(self, path: object, follow: bool, full: bool = True) -> None:
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, (str, bytes)):
            self.usable = False  # a descriptor: nothing to look at again by name
            return
        key = (path, follow, full)
        if key not in self.sigs:
            self.sigs[key] = sig_of(path, follow, full)

    @property
    def settled(self) -> bool:
        """Whether every change time it saw is old enough to trust an equal one later."""
        young = self.started_ns - SETTLED_NS
        return all(
            s[0] in ("E", "D") or (s[5] < young and s[4] < young) for s in self.sigs.values()
        )

    def still(self) -> bool:
        """Whether the computation would read exactly the same now."""
        if not self.usable or not self.settled:
            return False
        for (path, follow, full), sig in self.sigs.items():
            if sig_of(path, follow, full) != sig:
                return False
        return all(check() for check in self.checks)


def _current() -> Reads | None:
    rec: Reads | None = getattr(_tls, "rec", None)
    paused: int = getattr(_tls, "paused", 0)
    if rec is None or paused:
        return None
    return rec


def _wrap_stat(name: str) -> Callable[..., Any]:
    orig = _original[name]
    default_follow = name == "stat"

    def wrapped(path: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _current()
        if rec is not None:
            if kwargs.get("dir_fd") is not None or args:
                rec.usable = False
            else:
                rec.note(path, bool(kwargs.get("follow_symlinks", default_follow)), False)
        return orig(path, *args, **kwargs)

    return wrapped


def _wrap_path_call(name: str, follow: bool, full: bool = True) -> Callable[..., Any]:
    orig = _original[name]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        rec = _current()
        if rec is not None:
            path = args[0] if args else kwargs.get("path", ".")
            if kwargs.get("dir_fd") is not None:
                rec.usable = False
            else:
                rec.note(path, follow and kwargs.get("follow_symlinks", True), full)
        return orig(*args, **kwargs)

    return wrapped


class _Listing:
    """``os.scandir``'s iterator, noting each entry it yields (a caller may look at an entry's
    type or metadata through the entry, which does not go through ``os.stat``): its own
    signature, and for a symlink what it leads to too."""

    def __init__(self, it: Any, rec: Reads) -> None:
        self._it = it
        self._rec = rec

    def __iter__(self) -> _Listing:
        return self

    def __next__(self) -> Any:
        entry = next(self._it)
        path = entry.path
        self._rec.note(path, False, False)
        if entry.is_symlink():
            self._rec.note(path, True, False)
        return entry

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._it.close()


def _wrap_scandir() -> Callable[..., Any]:
    orig = _original["scandir"]

    def wrapped(path: Any = ".") -> Any:
        rec = _current()
        if rec is None:
            return orig(path)
        if not isinstance(path, (str, bytes, os.PathLike)):
            rec.usable = False  # a descriptor: nothing to look at again by name
            return orig(path)
        rec.note(path, True)
        return _Listing(orig(path), rec)

    return wrapped


def _wrap_open() -> Callable[..., Any]:
    orig = _original["open"]

    def wrapped(path: Any, flags: int, *args: Any, **kwargs: Any) -> Any:
        rec = _current()
        if rec is not None:
            if kwargs.get("dir_fd") is not None:
                rec.usable = False
            else:
                rec.note(path, not flags & os.O_NOFOLLOW)
        return orig(path, flags, *args, **kwargs)

    return wrapped


def _install() -> None:
    for name in ("stat", "lstat", "listdir", "scandir", "open", "readlink", "access"):
        _original[name] = getattr(os, name)
    os.stat = _wrap_stat("stat")
    os.lstat = _wrap_stat("lstat")
    os.listdir = _wrap_path_call("listdir", True)  # a listing: the directory's times count
    os.scandir = _wrap_scandir()
    os.readlink = _wrap_path_call("readlink", False)
    os.access = _wrap_path_call("access", True, full=False)
    os.open = _wrap_open()


def _uninstall() -> None:
    for name, fn in _original.items():
        setattr(os, name, fn)
    _original.clear()


@contextlib.contextmanager
def recording() -> Iterator[Reads]:
    """Record what the calling thread reads until the block ends."""
    global _active
    rec = Reads()
    with _lock:
        if _active == 0:
            _install()
        _active += 1
    outer = getattr(_tls, "rec", None)
    _tls.rec = rec
    try:
        yield rec
    finally:
        _tls.rec = outer
        with _lock:
            _active -= 1
            if _active == 0:
                _uninstall()
        if outer is not None:  # a nested computation's reads are its caller's too
            outer.sigs.update(rec.sigs)
            outer.checks += rec.checks
            outer.usable &= rec.usable


@contextlib.contextmanager
def unrecorded() -> Iterator[None]:
    """Reads in the block are not noted (the caller adds its own check)."""
    _tls.paused = getattr(_tls, "paused", 0) + 1
    try:
        yield
    finally:
        _tls.paused -= 1


def add_check(check: Callable[[], bool]) -> None:
    """Add to the calling thread's recording (if any) a check that must still hold."""
    rec = getattr(_tls, "rec", None)
    if rec is not None:
        rec.checks.append(check)
