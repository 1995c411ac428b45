"""What a project is at one moment: every path's type, mode and stat, and which content is kept.

The walk that builds a snapshot is in walk.py; this module holds the data, how two snapshots are
compared (``same_state``, ``diff``) and how a partial walk is put into a whole one (``merge``),
plus the safe file access both the walk and undo use.

Safety: directories are opened relative to their parent's fd with ``O_NOFOLLOW``, so a directory
swapped for a symlink is never entered; regular files are resolved with ``O_PATH|O_NOFOLLOW`` and
checked with ``fstat`` before a byte is read; FIFOs, sockets and devices are never opened.
"""

from __future__ import annotations

import ctypes
import os
import stat
from dataclasses import dataclass, field
from typing import Any, Final

from .project import trusted_fs

# Entry = (kind, mode, size, mtime_ns, ctime_ns, ino, data, flag)
#   Kept content ("covered"): "f" file (data: sha256 hex of the content kept in the store),
#   "l" symlink (data: target), "d" directory (its entries are listed too).
#   Not covered, compared by stat alone: "i" ignored beyond the budget (data: why; a directory's
#   size is its tree's, negative when only a lower bound is known), "b" over ``max_file_size``,
#   "s" FIFO/socket/device, "u" unreadable or changing while read (data: why), "g" a ``.git``
#   entry, "c" over the file-count cap.
#   ``flag``: for "f", the entry is racy (its times fell within RACY_NS of the walk: read again
#   next time); for the kinds that keep no content, the file was created during the run that
#   recorded it (undo removes it only when its own start keeps it: a file born during a run
#   may still hold older bytes, or be someone else's).
# A plain tuple, not a NamedTuple: marshal (the snapshot's storage format) only writes exact
# builtin types.
Entry = tuple[str, int, int, int, int, int, str | None, bool]
# Final, so that the checker types `entry[MODE]` by its field.
KIND: Final = 0
MODE: Final = 1
SIZE: Final = 2
MTIME: Final = 3
CTIME: Final = 4
INO: Final = 5
DATA: Final = 6
RACY: Final = 7
BORN: Final = 7
CONTENT_KINDS = frozenset("fld")
# Kinds whose entries undo can remove when a run created them (and the undo's start keeps them).
FILE_KINDS = frozenset("fbsu")

RACY_NS = 2_000_000_000  # covers coarse timestamp ticks up to 2 s (FAT, some network fs)
IGNORE_FILE_MAX = 1 << 20  # bytes of a .gitignore or info/exclude that are read

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


IgnoreFile = bytes  # the content of an ignore file (``Snapshot.bytes`` shadows the name there)


class TooManyFiles(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} files")
        self.limit = limit


@dataclass
class Snapshot:
    """Covered directories (project-relative, "" is the root) mapped to their children.

    Immutable once built: a later walk shares the child dicts of directories it found unchanged
    (so ``diff`` skips them by identity) and never edits them in place.

    Besides the entries: ``gitignore`` and ``exclude`` are the ignore files the walk classified
    paths with (by directory; ``exclude`` by the work tree of the repository whose
    ``.git/info/exclude`` it is), so the walk at the end of a run classifies new paths with the
    rules from before it. ``ign`` maps each ignored root (the topmost ignored path) to the bytes
    of its tree; ``ign_used`` counts the bytes of ignored files whose content is kept (the
    ``undo.ignored_total`` budget). ``holes`` names the directories holding entries whose content
    is not kept, with their kinds (what the approval gate asks about). ``rules_stale``: a run
    changed an ignore file, so the next start classifies again. ``limits`` are the
    (max_file_size, ignored_file_max, ignored_total) the decisions were made under. ``scope``:
    the directories walked (project-relative; ``("",)`` is the whole project), the part of the
    project the runs could write. ``links``: files with more than one name, by inode (a write
    through one name changes the others, and inotify reports only the name written through).
    """

    dirs: dict[str, dict[str, Entry]]
    files: int = 0
    bytes: int = 0
    nested: list[str] = field(default_factory=list)
    taken_ns: int = 0
    blob_bytes_added: int = 0
    gitignore: dict[str, IgnoreFile] = field(default_factory=dict)
    exclude: dict[str, IgnoreFile] = field(default_factory=dict)
    ign: dict[str, int] = field(default_factory=dict)
    ign_used: int = 0
    holes: dict[str, str] = field(default_factory=dict)
    rules_stale: bool = False
    limits: tuple[int, int, int] = (0, 0, 0)
    scope: tuple[str, ...] = ("",)
    links: dict[str, int] = field(default_factory=dict)

    def entry(self, path: str) -> Entry | None:
        parent, _, name = path.rpartition("/")
        kids = self.dirs.get(parent)
        return None if kids is None else kids.get(name)

    def ignored_root(self, path: str) -> str | None:
        """The ignored root ``path`` is (or lies under), or None when it is not ignored."""
        if not self.ign:
            return None
        if path in self.ign:
            return path
        parts = path.split("/")
        for i in range(len(parts) - 1, 0, -1):
            anc = "/".join(parts[:i])
            if anc in self.ign:
                return anc
        return None

    def to_data(self) -> dict[str, Any]:
        return {
            "dirs": self.dirs,
            "files": self.files,
            "bytes": self.bytes,
            "nested": self.nested,
            "taken_ns": self.taken_ns,
            "gitignore": self.gitignore,
            "exclude": self.exclude,
            "ign": self.ign,
            "ign_used": self.ign_used,
            "holes": self.holes,
            "rules_stale": self.rules_stale,
            "limits": self.limits,
            "scope": self.scope,
            "links": self.links,
        }

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> Snapshot:
        return cls(
            d["dirs"],
            d["files"],
            d["bytes"],
            list(d["nested"]),
            d["taken_ns"],
            0,
            dict(d["gitignore"]),
            dict(d["exclude"]),
            dict(d["ign"]),
            int(d["ign_used"]),
            dict(d["holes"]),
            bool(d["rules_stale"]),
            tuple(d["limits"]),
            tuple(d["scope"]),
            dict(d["links"]),
        )


def entry_data(e: Entry) -> str:
    """The DATA of a file (its blob's hash) or a link (its target) entry, which is always set."""
    data = e[DATA]
    assert data is not None, e
    return data


def join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def stat_key(e: Entry) -> tuple[int, int, int, int, int]:
    """(file type and mode, size, mtime, ctime, inode) of an entry, whatever its kind: how entries
    whose content is not kept are compared (a directory's size does not count)."""
    k = e[KIND]
    if k == "f":
        mode = e[MODE] | stat.S_IFREG
    elif k == "d":
        mode = e[MODE] | stat.S_IFDIR
    else:
        mode = e[MODE]
    size = 0 if stat.S_ISDIR(mode) else e[SIZE]
    return (mode, size, e[MTIME], e[CTIME], e[INO])


def same_state(a: Entry | None, b: Entry | None) -> bool:
    """Whether two entries describe the same thing for undo (content, mode, target, type).

    Two entries with content compare by it; when either keeps no content (ignored beyond the
    budget, too large, unreadable, special), by what ``lstat`` says: the same inode with the same
    times and size is the same file, however each walk could read it."""
    if a is None or b is None:
        return a is b
    k = a[KIND]
    if k in CONTENT_KINDS and b[KIND] == k:
        if k == "f":
            return a[MODE] == b[MODE] and a[DATA] == b[DATA]
        if k == "l":
            return a[DATA] == b[DATA]
        return a[MODE] == b[MODE]
    if k in CONTENT_KINDS and b[KIND] in CONTENT_KINDS:
        return False
    return stat_key(a) == stat_key(b)


def diff(a: Snapshot, b: Snapshot) -> list[tuple[str, Entry | None, Entry | None]]:
    """Every path whose state differs between ``a`` and ``b``, sorted by path."""
    if a is b or a.dirs is b.dirs:
        return []
    out = []
    for d in a.dirs.keys() | b.dirs.keys():
        ka, kb = a.dirs.get(d), b.dirs.get(d)
        if ka is kb:
            continue
        ka, kb = ka or {}, kb or {}
        for name in ka.keys() | kb.keys():
            ea, eb = ka.get(name), kb.get(name)
            if not same_state(ea, eb):
                out.append((join(d, name), ea, eb))
    out.sort(key=lambda c: os.fsencode(c[0]))
    return out


def open_regular(dir_fd: int, name: str) -> tuple[int, os.stat_result] | None:
    """Open ``name`` (relative to ``dir_fd``) for reading only if it is a regular file, race-free:
    the path is resolved once with ``O_PATH|O_NOFOLLOW`` (which opens no FIFO or device), checked
    with ``fstat``, then reopened through ``/proc/self/fd``, which names that same inode. None when
    it is absent or not a regular file; PermissionError when it cannot be read."""
    try:
        pfd = os.open(name, PATH_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(pfd)
        if not stat.S_ISREG(st.st_mode):
            return None
        try:
            return os.open(f"/proc/self/fd/{pfd}", READ_FLAGS & ~os.O_NOFOLLOW), st
        except FileNotFoundError:  # no /proc: O_NOFOLLOW|O_NONBLOCK still never blocks
            fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
            st2 = os.fstat(fd)
            if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                return None
            return fd, st2
    except PermissionError:
        raise
    except OSError:
        return None
    finally:
        os.close(pfd)


def read_small(dir_fd: int, name: str, cap: int) -> bytes | None:
    """A small regular file's first ``cap`` bytes; None if absent, not a regular file or
    unreadable. Never blocks, never follows a symlink."""
    try:
        got = open_regular(dir_fd, name)
    except OSError:
        return None
    if got is None:
        return None
    try:
        return os.read(got[0], cap)
    except OSError:
        return None
    finally:
        os.close(got[0])


def open_dir(root_fd: int, rel: str) -> int:
    """An fd of the project directory ``rel``, reached without following any symlink."""
    fd = os.dup(root_fd)
    try:
        for part in rel.split("/") if rel else []:
            nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def stat_entry(kind: str, st: os.stat_result, data: str | None = None, flag: bool = False) -> Entry:
    return (kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, data, flag)


_stat_entry = stat_entry  # the name undo's Tree imports


# -- birth times (statx) -----------------------------------------------------------------------

_AT_SYMLINK_NOFOLLOW = 0x100
_STATX_BTIME = 0x800


class _StatxTs(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32), ("_r", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    _fields_ = [
        ("stx_mask", ctypes.c_uint32),
        ("stx_blksize", ctypes.c_uint32),
        ("stx_attributes", ctypes.c_uint64),
        ("stx_nlink", ctypes.c_uint32),
        ("stx_uid", ctypes.c_uint32),
        ("stx_gid", ctypes.c_uint32),
        ("stx_mode", ctypes.c_uint16),
        ("_s0", ctypes.c_uint16),
        ("stx_ino", ctypes.c_uint64),
        ("stx_size", ctypes.c_uint64),
        ("stx_blocks", ctypes.c_uint64),
        ("stx_attributes_mask", ctypes.c_uint64),
        ("stx_atime", _StatxTs),
        ("stx_btime", _StatxTs),
        ("stx_ctime", _StatxTs),
        ("stx_mtime", _StatxTs),
        ("_rest", ctypes.c_uint64 * 48),  # struct statx is 256 bytes; room for a larger one
    ]


_statx: Any = None


def born_after(dir_fd: int, name: str, ino: int, since_ns: int) -> bool:
    """Whether the inode ``ino`` at ``name`` was created after ``since_ns`` (its birth time, from
    ``statx``; ``since_ns`` is the stamp of a file made when the run began, ``store.file_clock``).
    A file born with the same stamp may have been made just before it, so it counts as older:
    undo then keeps it rather than delete bytes that may predate the run. False too whenever
    that cannot be told: no birth time on this file system, no ``statx``, or a file system
    whose stamps may come from another machine's clock (network and FUSE file systems)."""
    global _statx
    if _statx is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.statx
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                           ctypes.POINTER(_Statx)]  # fmt: skip
            _statx = fn
        except (OSError, AttributeError):
            _statx = False
    if not _statx or not trusted_fs(dir_fd):
        return False
    buf = _Statx()
    if _statx(dir_fd, os.fsencode(name), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, ctypes.byref(buf)):
        return False
    if not buf.stx_mask & _STATX_BTIME or buf.stx_ino != ino:
        return False
    born = int(buf.stx_btime.tv_sec) * 1_000_000_000 + int(buf.stx_btime.tv_nsec)
    return born > since_ns


# -- putting a partial walk into a whole one ---------------------------------------------------


def counts(kids: dict[str, Entry]) -> tuple[int, int]:
    """(files, bytes of kept file content) of one directory's entries."""
    files = total = 0
    for e in kids.values():
        k = e[KIND]
        if k in "flb":
            files += 1
            if k == "f":
                total += e[SIZE]
    return files, total


def ignored_bytes(snap: Snapshot, rel: str, kids: dict[str, Entry]) -> int:
    """Bytes of ignored files kept among ``kids`` (the entries of directory ``rel``)."""
    inside = bool(rel) and snap.ignored_root(rel) is not None
    total = 0
    for name, e in kids.items():
        if e[KIND] == "f" and (inside or join(rel, name) in snap.ign):
            total += e[SIZE]
    return total


def merge(prev: Snapshot, part: Snapshot) -> Snapshot:
    """``prev`` with the directories ``part`` listed again put in; the subtree of a directory
    that is no longer one is dropped. Counts, ignored roots, the budget and the holes are
    adjusted by what changed."""
    dirs = dict(prev.dirs)
    files, total = prev.files, prev.bytes
    dropped: set[str] = set()
    for rel, kids in part.dirs.items():
        old = dirs.get(rel) or {}
        dirs[rel] = kids
        f0, b0 = counts(old)
        f1, b1 = counts(kids)
        files += f1 - f0
        total += b1 - b0
        for name, e in old.items():
            if e[KIND] == "d" and (kids.get(name) or ("",))[KIND] != "d":
                gone = join(rel, name)
                for d in [d for d in dirs if d == gone or d.startswith(gone + "/")]:
                    if d not in part.dirs:
                        f0, b0 = counts(dirs.pop(d))
                        files -= f0
                        total -= b0
                        dropped.add(d)
    relisted = part.dirs.keys() | dropped
    ign = {k: v for k, v in prev.ign.items() if k.rpartition("/")[0] not in relisted}
    ign.update(part.ign)
    holes = {k: v for k, v in prev.holes.items() if k not in relisted}
    holes.update(part.holes)
    gitignore = {k: v for k, v in prev.gitignore.items() if k not in dropped}
    gitignore.update(part.gitignore)
    out = Snapshot(
        dirs,
        files,
        total,
        prev.nested,
        part.taken_ns,
        part.blob_bytes_added,
        gitignore,
        prev.exclude,
        ign,
        0,
        holes,
        prev.rules_stale or part.rules_stale,
        prev.limits,
        prev.scope,
        {k: v for k, v in prev.links.items() if k.rpartition("/")[0] not in relisted},
    )
    out.links.update(part.links)
    # The budget: ``part.ign_used`` counted the relisted directories (and what it walked new);
    # the rest is what ``prev`` counted outside them.
    used = prev.ign_used
    for rel in relisted:
        before = prev.dirs.get(rel)
        if before:
            used -= ignored_bytes(prev, rel, before)
    out.ign_used = max(0, used + part.ign_used)
    return out


def linked_moved(project: str, snap: Snapshot) -> set[str]:
    """The directories of ``snap``'s files with more than one name (``snap.links``) that
    ``lstat`` says changed since: a write through a name outside the project (``ln src/a
    ~/backup/a``, then an edit of the backup) tells no watch of the project, as inotify reports
    it only to a watch on the directory of the name written through. One ``lstat`` per such
    file, so each start and end of a run sees what is really there before it is recorded."""
    out: set[str] = set()
    for path in snap.links:
        e = snap.entry(path)
        try:
            st = os.lstat(os.path.join(project, path))
        except OSError:
            st = None
        if (
            e is None
            or st is None
            or (e[MTIME], e[CTIME], e[SIZE], e[INO])
            != (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        ):
            out.add(path.rpartition("/")[0])
    return out


def holes_changed(
    changes: list[tuple[str, Entry | None, Entry | None]],
    before: Snapshot,
    after: Snapshot,
    times: dict[str, int],
    since_ns: int,
) -> list[tuple[str, Entry | None, Entry | None]]:
    """``changes`` with each ignored tree not entered (kind "i") that had an event deep in it
    since ``since_ns`` (``times``, from the watches) and is there before and after: its own
    ``lstat`` may be the same (``rm node_modules/pkg/index.js``), but the run changed it."""
    listed = {path for path, _, _ in changes}
    more: list[tuple[str, Entry | None, Entry | None]] = []
    for path, t in times.items():
        if t < since_ns or path in listed:
            continue
        b, a = before.entry(path), after.entry(path)
        if b is not None and a is not None and b[KIND] == "i" and a[KIND] == "i":
            more.append((path, b, a))
    if not more:
        return changes
    return sorted(changes + more, key=lambda c: os.fsencode(c[0]))
