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

Looking again at every path costs a stat each (a few hundred for a sandbox policy: the PATH
directories' entries, the home directory's tool caches). So the first look that finds them all
the same also arms inotify watches (one instance per process, ``_Watches``): on each file it read
(its content and attributes) and on each directory above a path (its entries: a name made,
removed or renamed on the way, or the directory itself moved). The watches are added before that
look, so a change after it is an event. While armed, ``still()`` stats only what inotify does not
vouch for: directories (watching one for its files' changes costs the kernel a walk of every
entry it has cached), paths through a symlink or relative ones, files on a filesystem that can
change elsewhere (network, FUSE, proc), and files where runs may write (a shared mapping made
before the watch changes them without an event). It reads the events instead: one on a watched
file, or on a directory for a name on the way to a recorded path or for itself, means a full look
(which arms again); so does a lost event (the queue overflowed) or a change of the mount table.
Everything else (a sibling file written in the home directory) is ignored.

Parts that keep their own proof of freshness (the tree scan's inotify watches) read unrecorded
(``unrecorded()``) and add a check instead (``add_check``).

While a recording runs, ``os.stat``, ``os.lstat``, ``os.listdir``, ``os.scandir``, ``os.open``,
``os.readlink`` and ``os.access`` are wrapped (for every thread; only the recording thread's calls
are noted), and put back when no recording is left.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from run_bash import inotify
from run_bash.paths import Tops

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
    return _sig(st, full)


def _sig(st: os.stat_result, full: bool) -> Sig:
    """``sig_of`` from a stat already made."""
    if not full and stat.S_ISDIR(st.st_mode):
        return ("D", st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid)
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


Key = tuple[Any, bool, bool]  # (path, follow, full)

# A directory is watched for its entries only (a name made, removed or renamed; the directory
# itself moved or removed): that costs the kernel nothing per entry. Watching a directory for
# what happens to the files in it (writes, attributes) makes the kernel flag every entry it has
# cached, which for a large /tmp takes tens of milliseconds; so directories are stat'ed instead.
DIR_MASK = inotify.ENTRIES | inotify.IN_ONLYDIR | inotify.IN_DONT_FOLLOW
# A file (or symlink, device, FIFO, socket) is watched itself: its content and attributes.
FILE_MASK = (
    inotify.IN_MODIFY
    | inotify.IN_ATTRIB
    | inotify.IN_CLOSE_WRITE
    | inotify.IN_DELETE_SELF
    | inotify.IN_MOVE_SELF
    | inotify.IN_DONT_FOLLOW
)
# Writes to a device, FIFO or socket leave its size and times as they were (``/dev/null``).
CONTENT = inotify.IN_MODIFY | inotify.IN_CLOSE_WRITE
EVENT_LOG = 4096  # events kept for armed recordings that have not looked since


def _max_watches(path: str = "/proc/sys/fs/inotify/max_user_watches") -> int:
    """How many watches armed recordings may hold: an eighth of the user's limit, at most 4096
    (a policy needs a few hundred). The guard's and the undo index's watches, which keep runs
    safe and undoable, must never find the limit used up by this, which only saves time."""
    try:
        with open(path) as f:
            limit = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        limit = 8192
    return max(0, min(4096, limit // 8))


class _Watches:
    """The process's inotify instance for armed recordings, and the events it has seen, each
    numbered (``seq``), the last ``EVENT_LOG`` of them kept."""

    def __init__(self) -> None:
        self.ino = inotify.Inotify()
        self.lock = threading.Lock()
        self.seq = 0
        self.log: collections.deque[tuple[int, int, int, str]] = collections.deque(maxlen=EVENT_LOG)
        self.lost = 0  # events up to this one may be missing (overflow, a failed read)
        self.wds: set[int] = set()  # live watches
        self.max = _max_watches()

    def add(self, path: str, mask: int) -> int | None:
        """The watch on ``path`` (the kernel's: the same inode gets the same one); None when it
        cannot be had, or when this instance holds its share already (``_max_watches``)."""
        with self.lock:
            if len(self.wds) >= self.max:
                return None
            try:
                wd = self.ino.add(path, mask)
            except OSError:
                return None
            self.wds.add(wd)
            return wd

    def pump(self) -> int:
        """Read what is queued; the number of the last event."""
        with self.lock:
            try:
                events = self.ino.read()
            except OSError:
                events = [(-1, inotify.IN_Q_OVERFLOW, "")]
            for wd, mask, name in events:
                self.seq += 1
                if mask & inotify.IN_Q_OVERFLOW:
                    self.lost = self.seq
                if mask & inotify.IN_IGNORED:  # the kernel dropped the watch (its inode is gone)
                    self.wds.discard(wd)
                self.log.append((self.seq, wd, mask, name))
            return self.seq

    def since(self, seq: int) -> list[tuple[int, int, int, str]] | None:
        """The events after ``seq``; None when some of them may be missing."""
        with self.lock:
            if self.lost > seq or (self.log and self.log[0][0] > seq + 1):
                return None
            # The log's numbers run without a gap up to ``self.seq``: the newest few are the
            # ones asked for (a look costs the events since, not the whole log).
            return list(itertools.islice(reversed(self.log), max(0, self.seq - seq)))[::-1]


_WATCHES: list[_Watches | None] = []
_WATCHES_LOCK = threading.Lock()


def _watches() -> _Watches | None:
    """The process's instance (made on first use); None when inotify cannot be had."""
    with _WATCHES_LOCK:
        if not _WATCHES:
            try:
                _WATCHES.append(_Watches())
            except OSError:
                _WATCHES.append(None)
        return _WATCHES[0]


def _mount_generation() -> int | None:
    from run_bash.sandbox.spare import mounts

    return mounts().generation()


class _Armed:
    """A recording's watches: ``dirs[wd]`` are the entry names that matter in that watched
    directory; ``files[wd]`` whether writes to that watched file matter (not for a device);
    ``slow`` the paths looked at by stat every time; ``seq`` the last event accounted for."""

    def __init__(self, mounts: int) -> None:
        self.dirs: dict[int, set[str]] = {}
        self.files: dict[int, bool] = {}
        self.slow: list[Key] = []
        self.mounts = mounts
        self.seq = 0

    def quiet(self, w: _Watches) -> bool:
        """Whether nothing that matters happened since ``seq`` (and if so, account for it)."""
        latest = w.pump()
        events = w.since(self.seq)
        if events is None or _mount_generation() != self.mounts:
            return False
        for _seq, wd, mask, name in events:
            if mask & inotify.IN_Q_OVERFLOW:
                return False
            names = self.dirs.get(wd)
            if names is not None and (not name or name in names):
                return False  # the directory itself, or an entry on the way to a path
            content = self.files.get(wd)
            if content is not None and (content or mask & ~CONTENT):
                return False
        self.seq = latest
        return True


# How far ``_arm``'s walk down to a directory got.
_REACHED, _MISSING, _BLIND = 0, 1, 2


def _arm(sigs: dict[Key, Sig], writable: Tops) -> _Armed | None:
    """Watches for every recorded path that inotify can vouch for (see the module docstring);
    None when there can be none (no inotify, no view of the mount table). A file under
    ``writable`` is left to stat: a process that mapped it shared and writable before the watch
    existed changes it without an event (its times move)."""
    w = _watches()
    mounts = _mount_generation()
    if w is None or mounts is None:
        return None
    armed = _Armed(mounts)
    armed.seq = w.pump()
    lstats: dict[str, os.stat_result | None] = {}
    local: dict[int, bool] = {}
    wds: dict[str, int | None] = {}  # each path is added once

    def look(path: str) -> os.stat_result | None:
        if path not in lstats:
            try:
                lstats[path] = _LSTAT(path)
            except OSError:
                lstats[path] = None
        return lstats[path]

    def add(path: str, st: os.stat_result, mask: int) -> int | None:
        if path not in wds:
            if st.st_dev not in local:
                local[st.st_dev] = inotify.sees_every_change(path)
            wds[path] = w.add(path, mask) if local[st.st_dev] else None
        return wds[path]

    # How far the walk from / down to a directory gets (``reach``), kept per directory (the
    # paths of a recording share most of theirs): to it (its lstat), or it stopped above it at
    # a missing entry (the watch on its parent for that name vouches for everything below), or
    # where nothing can vouch (no watch, a symlink on the way: what it leads to can change
    # elsewhere).
    reached: dict[str, tuple[int, os.stat_result | None]] = {"/": (_REACHED, look("/"))}

    def entry(parent: str, st: os.stat_result | None, name: str) -> bool:
        """Watch the directory ``parent`` (lstat ``st``) for its entry ``name``."""
        wd = add(parent, st, DIR_MASK) if st is not None and stat.S_ISDIR(st.st_mode) else None
        if wd is None:
            return False
        armed.dirs.setdefault(wd, set()).add(name)
        return True

    def reach(d: str) -> tuple[int, os.stat_result | None]:
        below: list[str] = []
        while d not in reached:
            below.append(d)
            d = d.rpartition("/")[0] or "/"
        how, st = reached[d]
        for sub in reversed(below):
            if how == _REACHED:
                if not entry(d, st, sub.rpartition("/")[2]):
                    how, st = _BLIND, None
                else:
                    st = look(sub)
                    if st is None:
                        how = _MISSING
                    elif stat.S_ISLNK(st.st_mode):
                        how, st = _BLIND, None
            reached[sub] = (how, st)
            d = sub
        return how, st

    for key in sigs:
        path, follow, _full = key
        if (
            not isinstance(path, str)
            or not path.startswith("/")
            or path.startswith("//")
            or path != os.path.normpath(path)
            or path == "/"
        ):
            armed.slow.append(key)
            continue
        parent, _, name = path.rpartition("/")
        parent = parent or "/"
        how, above = reach(parent)
        if how == _MISSING:
            continue  # a directory above does not exist (yet): the entry on its way is watched
        if how == _BLIND or not entry(parent, above, name):
            armed.slow.append(key)
            continue
        st = look(path)
        if st is None:
            continue  # does not exist (yet): its parent's entry is all there is to watch
        # Through a symlink, what it leads to can change elsewhere. The path itself: a file is
        # watched; a directory is stat'ed (see DIR_MASK), and so is a file where runs may write.
        if (
            (stat.S_ISLNK(st.st_mode) and follow)
            or stat.S_ISDIR(st.st_mode)
            or (stat.S_ISREG(st.st_mode) and path in writable)
        ):
            armed.slow.append(key)
            continue
        wd = add(path, st, FILE_MASK)
        if wd is None:
            armed.slow.append(key)
        else:
            armed.files[wd] = armed.files.get(wd, False) or not _special(st.st_mode)
    return armed


def _special(mode: int) -> bool:
    """A device, FIFO or socket: written to and read without its metadata moving."""
    return stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Reads:
    """What one computation read (see the module docstring)."""

    def __init__(self) -> None:
        self.sigs: dict[Key, Sig] = {}
        self.checks: list[Callable[[], bool]] = []
        self.usable = True
        self.started_ns = time.time_ns()
        self._armed: _Armed | None = None
        self._lock = threading.Lock()
        self.looks = 0  # full looks (every path stat'ed again) so far
        self._settled: bool | None = None  # ``settled``, once asked (a new path forgets it)

    def note(self, path: object, follow: bool, full: bool = True) -> None:
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, (str, bytes)):
            self.usable = False  # a descriptor: nothing to look at again by name
            return
        key = (path, follow, full)
        if self._new(key):
            self.sigs[key] = sig_of(path, follow, full)

    def stat(self, path: str | bytes, follow: bool) -> os.stat_result:
        """``os.stat(path)`` (``os.lstat`` unless ``follow``), noted from that very call: what
        the caller saw is what is looked at again (one stat, not two)."""
        key = (path, follow, False)
        try:
            st = _STAT(path) if follow else _LSTAT(path)
        except OSError as e:
            if self._new(key):
                self.sigs[key] = ("E", e.errno)
            raise
        if self._new(key):
            self.sigs[key] = _sig(st, False)
        return st

    def _new(self, key: Key) -> bool:
        """Whether ``key`` was not noted yet (the first look counts: the caller notes it now)."""
        if key in self.sigs:
            return False
        self._settled = None
        return True

    @property
    def armed(self) -> bool:
        """Whether inotify watches stand in for the stats (see the module docstring)."""
        return self._armed is not None

    @property
    def settled(self) -> bool:
        """Whether every change time it saw is old enough to trust an equal one later (against
        when the recording started: the answer holds for as long as the paths noted do)."""
        if self._settled is None:
            young = self.started_ns - SETTLED_NS
            self._settled = all(
                s[0] in ("E", "D") or (s[5] < young and s[4] < young) for s in self.sigs.values()
            )
        return self._settled

    def look(self) -> bool:
        """Whether the computation would read exactly the same now, by looking at every path it
        read once, without setting watches: for an answer asked for once, soon after it was
        made (``still`` sets them, which pays only when it is asked for again and again)."""
        if not self.usable or not self.settled:
            return False
        if any(sig_of(*key) != sig for key, sig in list(self.sigs.items())):
            return False
        return all(check() for check in self.checks)

    def still(self, writable: Iterable[str] = ()) -> bool:
        """Whether the computation would read exactly the same now. ``writable``: directories
        where other processes may write (their files are always stat'ed, see ``_arm``)."""
        if not self.usable or not self.settled:
            return False
        with self._lock:
            armed, w = self._armed, _WATCHES[0] if _WATCHES else None
            if armed is not None and w is not None and armed.quiet(w):
                keys: Any = armed.slow  # inotify vouches for the rest
            else:
                # Watches first, then the look: a change after the look is an event.
                tops = Tops(os.path.realpath(p) for p in writable if isinstance(p, str))
                self._armed = _arm(self.sigs, tops)
                keys = self.sigs
                self.looks += 1
            for key in keys:
                if sig_of(*key) != self.sigs[key]:
                    self._armed = None
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
        if rec is None:
            return orig(path, *args, **kwargs)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if kwargs.get("dir_fd") is not None or args or not isinstance(path, (str, bytes)):
            rec.usable = False  # relative to a descriptor, or one: nothing to look at by name
            return orig(path, *args, **kwargs)
        return rec.stat(path, bool(kwargs.get("follow_symlinks", default_follow)))

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
