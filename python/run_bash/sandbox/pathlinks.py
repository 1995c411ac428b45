"""Hard links: another name, in a writable grant, of a program on ``PATH`` (or of the file a ``PATH``
link runs). Bind mounts and Landlock rules are per path: a write through the other name would change
the program the user runs, so that name is kept read-only inside the run too (``hostread.py`` binds
it). See ``hard_links``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from run_bash import fsdeps, inotify
from run_bash.paths import Tops, is_under
from run_bash.sandbox import headstart
from run_bash.sandbox.gitask import HostReadError
from run_bash.sandbox.pathguard import (
    MAX_ENTRIES,
    MAX_KEPT_ANSWERS,
    OPTION,
    _dir_sig,
    path_directories,
)
from run_bash.sandbox.places import Places

# Entries of the writable grants looked at for the other names of the programs on PATH.
MAX_LINK_SEARCH = 500_000
# Filesystems whose directory listings give each entry's inode number as stat does (ext2/3/4,
# xfs, btrfs, tmpfs, f2fs, zfs, bcachefs): the search compares those without a stat per file.
# Elsewhere (overlayfs, network filesystems) every file is stat'ed.
_DINO_FS = frozenset(
    {0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0xF2F52010, 0x2FC12FC1, 0xCA451A4E}
)

Inode = tuple[int, int]  # (st_dev, st_ino)


@dataclass(frozen=True)
class HardLink:
    """``name`` (in a writable grant) is another name of ``program``, a program on ``PATH`` (or
    the file a ``PATH`` link runs): a write through it changes what the user runs."""

    name: str
    program: str


def may_write(st: os.stat_result) -> bool:
    """Whether a run (this user) could change the file ``st`` is the state of, by some name: it
    owns it (and may give itself the write bit) or a group or others may write it; root may
    write anything."""
    euid = os.geteuid()
    return euid == 0 or st.st_uid == euid or bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def hard_links(dirs: Sequence[str], ends: Sequence[str], writable: Places) -> list[HardLink]:
    """Every name inside a writable grant of a regular file in a ``PATH`` directory of ``dirs``
    or among ``ends`` (the files ``PATH`` links run) that has names the directories do not
    account for (``st_nlink``: ``/usr/bin/perl`` and ``perl5.36.0`` account for each other).
    Only files a run could write (``may_write``) on the filesystem of a grant count.

    Each directory's regular files are taken once per state of it (``_census``: a name added,
    removed or replaced changes its signature); their link counts are read each time (a name
    made in a grant for a file on PATH changes neither directory). The grants are searched only
    for an inode with names unaccounted for, once per state of it (``_SEARCHED``: a name made
    or removed changes its ctime). Read unnoted by a policy's recording, like
    ``read_only_dirs``, and checked by asking again. Raises HostReadError when a search must stop
    before it has found every name (``MAX_LINK_SEARCH``)."""
    dirs, ends = tuple(dirs), tuple(ends)
    with fsdeps.unrecorded():
        out = _hard_links(dirs, ends, writable)

    def check() -> bool:
        try:
            return _hard_links(dirs, ends, writable) == out
        except HostReadError:
            return False

    fsdeps.add_check(check)
    return out


def _hard_links(dirs: Sequence[str], ends: Sequence[str], writable: Places) -> list[HardLink]:
    tops = _tops(writable.real)
    devs: set[int] = set()
    for t in tops:
        with contextlib.suppress(OSError):
            devs.add(os.stat(t).st_dev)
    if not devs:
        return []
    in_grants = Tops(tops)
    seen: set[Inode] = set()
    looked: list[tuple[str, int, bool]] = []  # (directory, its st_dev, outside every grant)
    headstart.take()  # the first look: what the launcher's fork server made meanwhile
    with _PROGRAMS.lock:
        _PROGRAMS.pump()
        for d in dirs:
            try:
                st = os.stat(d)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen or st.st_dev not in devs:
                continue  # the same directory by another name, or no grant on its filesystem
            seen.add((st.st_dev, st.st_ino))
            away = d not in in_grants and os.path.realpath(d) not in in_grants
            looked.append((d, st.st_dev, away))
            _PROGRAMS.files(d, st.st_dev)
        # What the files say, put together again only when one of them changed. One sum per
        # set of directories: a policy asks for two (its PATH directories, and the ones its
        # links lead to), and two projects' policies see the same directory differently.
        looked_key = tuple(looked)
        summed = _PROGRAMS.counted.get(looked_key)
        if summed is not None and summed[0] == _PROGRAMS.generation:
            over = summed[1]
        else:
            known: dict[Inode, list[str]] = {}  # each inode's names in the PATH directories
            outside: dict[Inode, int] = {}  # how many of those lie outside every grant
            counts: dict[Inode, int] = {}  # each one's link count
            for d, dev, away in looked:
                for path, ino, nlink in _PROGRAMS.files(d, dev):
                    key = (dev, ino)
                    known.setdefault(key, []).append(path)
                    counts[key] = nlink
                    if away:
                        outside[key] = outside.get(key, 0) + 1
            # The inodes with more names than the PATH directories show: (names, outside).
            over = {
                k: (tuple(ps), outside.get(k, 0)) for k, ps in known.items() if counts[k] > len(ps)
            }
            if len(_PROGRAMS.counted) >= MAX_KEPT_ANSWERS:
                _PROGRAMS.counted.clear()
            _PROGRAMS.counted[looked_key] = (_PROGRAMS.generation, over)
    known_names = {k: v[0] for k, v in over.items()}
    outside = {k: v[1] for k, v in over.items()}
    wanted: dict[Inode, tuple[os.stat_result, str]] = {}
    for key, paths in known_names.items():
        with contextlib.suppress(OSError):
            st = os.lstat(paths[0])
            if (st.st_dev, st.st_ino) == key and st.st_nlink > len(paths):
                wanted[key] = (st, paths[0])
    for e in ends:
        with contextlib.suppress(OSError):
            st = os.lstat(e)
            key = (st.st_dev, st.st_ino)
            listed = known_names.get(key, ())
            if (
                stat.S_ISREG(st.st_mode)
                and st.st_dev in devs
                and st.st_nlink > len(listed) + (e not in listed)
                and may_write(st)
            ):
                wanted.setdefault(key, (st, e))
    names: dict[Inode, tuple[str, ...]] = {}
    search: dict[Inode, int] = {}  # inode -> how many names to find in the grants
    for key, (st, _p) in wanted.items():
        hit = _SEARCHED.get((key[0], key[1], tops))
        if (
            hit is not None
            and hit[:2] == (st.st_ctime_ns, st.st_nlink)
            and _still_names(key, hit[2])
        ):
            names[key] = hit[2]
        else:
            search[key] = st.st_nlink - outside.get(key, 0)
    if search:
        programs = sorted(wanted[k][1] for k in search)
        for key, found in _search(search, tops, programs).items():
            st = wanted[key][0]
            if len(_SEARCHED) >= MAX_KEPT_ANSWERS:
                _SEARCHED.clear()
            _SEARCHED[(key[0], key[1], tops)] = (st.st_ctime_ns, st.st_nlink, found)
            names[key] = found
    out: list[HardLink] = []
    for key, (_st, program) in sorted(wanted.items(), key=lambda kv: kv[1][1]):
        out += [HardLink(n, program) for n in names.get(key, ()) if n != program]
    return out


def _tops(paths: Iterable[str]) -> tuple[str, ...]:
    """``paths`` without those inside another one, sorted."""
    ps = sorted(set(paths))
    return tuple(p for p in ps if not any(o != p and is_under(p, o) for o in ps))


# The names in the writable grants of each inode searched for, by (dev, inode, grants): (its
# ctime and link count then, the names). A name made or removed moves the ctime.
_SEARCHED: dict[tuple[int, int, tuple[str, ...]], tuple[int, int, tuple[str, ...]]] = {}


def _watch_budget(path: str = "/proc/sys/fs/inotify/max_user_watches") -> int:
    """How many files ``_Programs`` may watch: a sixteenth of the user's limit, at most 2048
    (the guard's and the change store's watches must never find the limit used up by this,
    which only saves stats)."""
    try:
        with open(path) as f:
            limit = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        limit = 8192
    return max(0, min(2048, limit // 16))


@dataclass
class _Listing:
    """One PATH directory's regular files a run could write, as listed when its signature was
    ``sig``: name -> [inode, link count]."""

    sig: object
    files: dict[str, list[int]]
    out: list[tuple[str, int, int]] | None = None  # ``_Programs.files``, while it holds
    unwatched: bool = False  # some file is stat'ed at every look


class _Programs:
    """The regular files of the PATH directories that a run could write, each with its link
    count, kept without a ``stat`` per file per look: a directory is listed again only when its
    signature changed (a name added, removed or replaced in it), and each file is watched by
    inotify for its attributes (``IN_ATTRIB``: a name made or removed anywhere changes its link
    count, which the directory's signature does not show). A file that cannot be watched (a
    filesystem changed elsewhere, the watch budget spent) is stat'ed at every look. Callers
    hold ``lock``."""

    MASK = inotify.IN_ATTRIB | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ino: inotify.Inotify | None = None
        self._no_ino = False
        self._budget: int | None = None
        self._dirs: dict[str, _Listing] = {}
        self._wd_of: dict[str, int] = {}  # watched path -> wd (one per inode)
        self._paths_of: dict[int, set[str]] = {}  # wd -> the paths it stands for
        self._dirty: set[str] = set()  # watched paths whose count must be read again
        self._local: dict[int, bool] = {}  # st_dev -> inotify sees every change there
        # Moves whenever a file's inode or count read differs, or a listing is made or dropped.
        self.generation = 0
        # ``_hard_links``'s sum of the files, by the directories looked at: (generation, sum).
        self.counted: dict[object, tuple[int, dict[Inode, tuple[tuple[str, ...], int]]]] = {}
        self.adopted = 0  # listings taken over from another process (``adopt``)

    def export(self) -> tuple[dict[str, Any], int] | None:
        """This object's listings and watches as plain data, with the descriptor of the inotify
        instance that holds the watches (the caller closes it once sent); this object is left
        empty. None when nothing is watched (then nothing is worth handing over)."""
        if self._ino is None or self._ino.fd < 0:
            return None
        dirs = []
        for d, listing in self._dirs.items():
            files = [
                [name, ino, nlink, self._wd_of.get(d + "/" + name, -1)]
                for name, (ino, nlink) in listing.files.items()
            ]
            sig = list(listing.sig) if isinstance(listing.sig, tuple) else None
            dirs.append([d, sig, files])
        data = {
            "dirs": dirs,
            "dirty": sorted(self._dirty),
            "local": [[dev, ok] for dev, ok in self._local.items()],
            "budget": self._budget or 0,
        }
        fd, self._ino.fd = self._ino.fd, -1
        self._ino = None
        self._dirs, self._wd_of, self._paths_of, self._dirty = {}, {}, {}, set()
        self.counted.clear()
        return data, fd

    def adopt(self, data: object, fd: int) -> bool:
        """Take over what ``export`` gave in another process (the fork server's ``warm``): its
        listings, and its inotify instance ``fd`` whose watches stand for them. The events queued
        since the watches were set are read at the next look, as for listings made here. Only
        while this object holds nothing; anything malformed is dropped (``fd`` is closed) and
        the directories are listed here as usual. True when taken."""
        try:
            if self._dirs or self._ino is not None or not isinstance(data, dict):
                raise ValueError("nothing to take")
            dirs: dict[str, _Listing] = {}
            wd_of: dict[str, int] = {}
            for d, sig, files in data["dirs"]:
                if not isinstance(d, str) or not os.path.isabs(d):
                    raise ValueError(d)
                sig = headstart.dir_sig(sig)
                listed: dict[str, list[int]] = {}
                for name, ino, nlink, wd in files:
                    if not isinstance(name, str) or "/" in name or not name:
                        raise ValueError(name)
                    if not all(type(x) is int for x in (ino, nlink, wd)):
                        raise ValueError(name)
                    listed[name] = [ino, nlink]
                    if wd >= 0:
                        wd_of[d + "/" + name] = wd
                dirs[d] = _Listing(sig, listed)
            dirty = {str(p) for p in data["dirty"] if isinstance(p, str)}
            local = {int(dev): bool(ok) for dev, ok in data["local"]}
            budget = data["budget"]
            if type(budget) is not int:
                raise ValueError(budget)
        except (KeyError, TypeError, ValueError):
            with contextlib.suppress(OSError):
                os.close(fd)
            return False
        self._ino = inotify.Inotify.adopt(fd)
        self._budget, self._local, self._dirs, self._wd_of = budget, local, dirs, wd_of
        self._dirty = dirty & wd_of.keys()
        for path, wd in wd_of.items():
            self._paths_of.setdefault(wd, set()).add(path)
        self.generation += 1
        self.adopted = len(dirs)
        return True

    def pump(self) -> None:
        """Read the events: every path a changed inode stands for is read again."""
        if self._ino is None:
            return
        try:
            events = self._ino.read()
        except OSError:
            events = [(-1, inotify.IN_Q_OVERFLOW, "")]
        for wd, mask, _name in events:
            if mask & inotify.IN_Q_OVERFLOW:
                self._dirty.update(self._wd_of)
                for listing in self._dirs.values():
                    listing.out = None
                continue
            paths = self._paths_of.get(wd, set())
            self._dirty.update(paths)
            for p in paths:
                held = self._dirs.get(os.path.dirname(p))
                if held is not None:
                    held.out = None
            if mask & inotify.IN_IGNORED:  # the kernel dropped the watch: stat'ed from now on
                for p in paths:
                    self._wd_of.pop(p, None)
                self._paths_of.pop(wd, None)

    def files(self, d: str, dev: int) -> list[tuple[str, int, int]]:
        """``(path, inode, link count)`` of each regular file of ``d`` on ``dev`` a run could
        write (``may_write``)."""
        sig = _dir_sig(d)
        listing = self._dirs.get(d)
        if listing is None or sig is None or listing.sig != sig:
            self._forget(d)
            listing = self._list(d, dev, sig)
        if listing.out is not None and not listing.unwatched:
            return listing.out  # nothing in it changed since
        out: list[tuple[str, int, int]] = []
        stale = unwatched = False
        for name, entry in listing.files.items():
            path = d + "/" + name
            watched = path in self._wd_of
            unwatched = unwatched or not watched
            if not watched or path in self._dirty:
                self._dirty.discard(path)
                try:
                    st = os.lstat(path)
                except OSError:
                    stale = True
                    continue
                if st.st_ino != entry[0]:
                    stale = True  # replaced since it was listed: taken as it is now
                if (st.st_ino, st.st_nlink) != tuple(entry):
                    entry[:] = [st.st_ino, st.st_nlink]
                    self.generation += 1
            out.append((path, entry[0], entry[1]))
        if stale:
            listing.sig = None  # listed again next time
        listing.out, listing.unwatched = out, unwatched
        return out

    def _list(self, d: str, dev: int, sig: object) -> _Listing:
        if len(self._dirs) >= MAX_KEPT_ANSWERS:
            for old in list(self._dirs):
                self._forget(old)
        files: dict[str, list[int]] = {}
        try:
            with os.scandir(d) as it:
                for i, entry in enumerate(it):
                    if i >= MAX_ENTRIES:
                        break
                    with contextlib.suppress(OSError):
                        if entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            if st.st_dev == dev and may_write(st):
                                files[entry.name] = [st.st_ino, st.st_nlink]
        except OSError:
            files = {}
        listing = self._dirs[d] = _Listing(sig, files)
        self.generation += 1
        if files and self._watching(d, dev):
            for name in files:
                path = d + "/" + name
                wd = self._add(path)
                if wd is None:
                    break
                self._wd_of[path] = wd
                self._paths_of.setdefault(wd, set()).add(path)
                self._dirty.add(path)  # its count is read once the watch stands
        return listing

    def _watching(self, d: str, dev: int) -> bool:
        if dev not in self._local:
            self._local[dev] = inotify.sees_every_change(d)
        if not self._local[dev] or self._no_ino:
            return False
        if self._ino is None:
            try:
                self._ino = inotify.Inotify()
            except OSError:
                self._no_ino = True
                return False
            self._budget = _watch_budget()
        return True

    def _add(self, path: str) -> int | None:
        assert self._ino is not None
        if len(self._paths_of) >= (self._budget or 0):
            return None
        try:
            return self._ino.add(path, self.MASK | inotify.IN_DONT_FOLLOW)
        except OSError:
            return None

    def _forget(self, d: str) -> None:
        """Drop the listing of ``d`` and the watches only it held."""
        listing = self._dirs.pop(d, None)
        if listing is None:
            return
        self.generation += 1
        for name in listing.files:
            path = d + "/" + name
            self._dirty.discard(path)
            wd = self._wd_of.pop(path, None)
            if wd is None:
                continue
            paths = self._paths_of.get(wd)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del self._paths_of[wd]
                    if self._ino is not None:
                        self._ino.remove(wd)


_PROGRAMS = _Programs()


def warm(path_var: str) -> tuple[dict[str, Any], int] | None:
    """List (and watch) the programs of each absolute entry of ``path_var`` as a policy's census
    does, and hand the result over (``_Programs.export``): the sandbox launcher's fork server
    does it for the host's first policy (``headstart.py``)."""
    with _PROGRAMS.lock:
        for d, dev in path_directories(path_var):
            _PROGRAMS.files(d, dev)
        return _PROGRAMS.export()


def _still_names(key: Inode, names: Iterable[str]) -> bool:
    """Whether every one of ``names`` is still a name of inode ``key``."""
    for n in names:
        try:
            st = os.lstat(n)
        except OSError:
            return False
        if (st.st_dev, st.st_ino) != key:
            return False
    return True


def _search(
    wanted: Mapping[Inode, int], tops: tuple[str, ...], programs: Sequence[str]
) -> dict[Inode, tuple[str, ...]]:
    """The names of each inode of ``wanted`` in the trees ``tops``, walked once (symlinks not
    followed, nor other filesystems entered) until each has as many as ``wanted`` says (the
    others lie outside every grant). An entry is compared by the inode number its directory
    gives where that is the one stat gives (``_DINO_FS``), then confirmed by ``lstat``."""
    found: dict[Inode, list[str]] = {k: [] for k in wanted}
    left = {k for k, n in wanted.items() if n > 0}
    devs = {dev for dev, _ino in wanted}
    inos = {ino for _dev, ino in wanted}
    by_dino: dict[int, bool] = {}
    todo: list[tuple[str, int]] = []
    for t in reversed(tops):
        with contextlib.suppress(OSError):
            st = os.lstat(t)
            if stat.S_ISDIR(st.st_mode) and st.st_dev in devs:
                todo.append((t, st.st_dev))
    looked = 0
    while todo and left:
        d, dev = todo.pop()
        if dev not in by_dino:
            by_dino[dev] = inotify.fs_type(d) in _DINO_FS
        quick = by_dino[dev]
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for entry in it:
                looked += 1
                if looked > MAX_LINK_SEARCH:
                    raise HostReadError(
                        f"{', '.join(programs)} on your PATH has other names (hard links) that "
                        f"may lie where runs write, but there are more than {MAX_LINK_SEARCH} "
                        f"entries there to look through: remove the other names, or add "
                        f"{os.path.dirname(programs[0])} to `{OPTION}`"
                    )
                try:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.stat(follow_symlinks=False).st_dev
                        if sub in devs:
                            todo.append((entry.path, sub))
                        continue
                    if quick and entry.inode() not in inos:
                        continue
                    key = _inode(entry.path)
                except OSError:
                    continue
                if key in found and entry.path not in found[key]:
                    found[key].append(entry.path)
                    if len(found[key]) >= wanted[key]:
                        left.discard(key)
    return {k: tuple(sorted(v)) for k, v in found.items()}


def _inode(path: str) -> Inode:
    st = os.lstat(path)
    return (st.st_dev, st.st_ino)
