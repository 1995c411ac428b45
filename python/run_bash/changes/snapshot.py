"""One walk of a project: what every path is, and the content of what is covered.

Safety: the walk opens each directory relative to its parent's fd with ``O_NOFOLLOW``, so a
directory the command swapped for a symlink is never entered; regular files are opened with
``O_NONBLOCK|O_NOFOLLOW|O_NOCTTY`` and checked with ``fstat`` before a byte is read; FIFOs,
sockets and devices are listed from ``lstat`` alone and never opened. Nothing here writes into the
project.

Incremental: a previous snapshot acts as the stat cache. A file whose (mode, size, mtime, ctime,
inode) are unchanged keeps its recorded hash without being read, unless its times fell within
``RACY_NS`` of the walk that recorded it (a second write in the same timestamp tick could then
hide; such "racy" files are read again, like git's racy-index rule).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .ignore import Rules, Source, parse
from .objects import PackWriter

# Entry = (kind, mode, size, mtime_ns, ctime_ns, ino, data, racy)
#   kind "f" file (data: sha256 hex), "l" symlink (data: target), "d" directory,
#   not covered (no content kept, compared by stat): "i" ignored, "b" over the size cap,
#   "s" FIFO/socket/device, "u" unreadable or changing while read (data: why), "g" a .git entry,
#   "c" over the file-count cap.
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
CONTENT_KINDS = frozenset("fld")

RACY_NS = 2_000_000_000  # covers coarse timestamp ticks up to 2 s (FAT, some network fs)
IGNORE_FILE_MAX = 1 << 20  # bytes of a .gitignore or info/exclude that are read

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class TooManyFiles(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} files")
        self.limit = limit


@dataclass
class Snapshot:
    """Covered directories (project-relative, "" is the root) mapped to their children.

    Immutable once built: a later walk shares the child dicts of directories it found unchanged
    (so ``diff`` skips them by identity) and never edits them in place.
    """

    dirs: dict[str, dict[str, Entry]]
    files: int = 0
    bytes: int = 0
    nested: list[str] = field(default_factory=list)
    taken_ns: int = 0
    blob_bytes_added: int = 0

    def entry(self, path: str) -> Entry | None:
        parent, _, name = path.rpartition("/")
        kids = self.dirs.get(parent)
        return None if kids is None else kids.get(name)

    def to_data(self) -> dict[str, Any]:
        return {
            "dirs": self.dirs,
            "files": self.files,
            "bytes": self.bytes,
            "nested": self.nested,
            "taken_ns": self.taken_ns,
        }

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> Snapshot:
        return cls(d["dirs"], d["files"], d["bytes"], list(d["nested"]), d["taken_ns"])


def entry_data(e: Entry) -> str:
    """The DATA of a file (its blob's hash) or a link (its target) entry, which is always set."""
    data = e[DATA]
    assert data is not None, e
    return data


def join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def same_state(a: Entry | None, b: Entry | None) -> bool:
    """Whether two entries describe the same thing for undo (content, mode, target, type)."""
    if a is None or b is None:
        return a is b
    k = a[KIND]
    if k != b[KIND]:
        return False
    if k == "f":
        return a[MODE] == b[MODE] and a[DATA] == b[DATA]
    if k == "l":
        return a[DATA] == b[DATA]
    if k == "d":
        return a[MODE] == b[MODE]
    return a[MODE : INO + 1] == b[MODE : INO + 1] and a[DATA] == b[DATA]


def diff(a: Snapshot, b: Snapshot) -> list[tuple[str, Entry | None, Entry | None]]:
    """Every path whose state differs between ``a`` and ``b``, sorted by path."""
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


def _exclude_source(dir_fd: int, base: str) -> Source | None:
    """``.git/info/exclude`` of the repository whose work tree is the directory ``dir_fd``."""
    fds = []
    try:
        fd = dir_fd
        for part in (".git", "info"):
            fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            fds.append(fd)
        data = read_small(fd, "exclude", IGNORE_FILE_MAX)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)
    return Source(base, parse(data)) if data else None


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


def rules_above(root_fd: int, rel: str) -> Rules:
    """The ignore rules that apply to the entries of directory ``rel`` from the directories
    above it (its own ``.gitignore`` is added by the walk), as a whole walk would build them."""
    rules = Rules()
    src = _exclude_source(root_fd, "")
    if src is not None:
        rules = rules.child(src)
    if not rel:
        return rules
    parts = rel.split("/")
    fd = os.dup(root_fd)
    try:
        acc = ""
        for part in parts:
            if acc:  # a nested repository restarts the rules, like in the walk
                try:
                    os.stat(".git", dir_fd=fd, follow_symlinks=False)
                    rules = Rules()
                    src = _exclude_source(fd, acc)
                    if src is not None:
                        rules = rules.child(src)
                except OSError:
                    pass
            data = read_small(fd, ".gitignore", IGNORE_FILE_MAX)
            if data:
                rules = rules.child(Source(acc, parse(data)))
            nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
            acc = join(acc, part)
    finally:
        os.close(fd)
    return rules


class LazyRules(Rules):
    """``rules_above`` computed on first use (a directory listed again rarely needs it)."""

    __slots__ = ("_args", "_real")

    def __init__(self, root_fd: int, rel: str) -> None:
        super().__init__()
        self._args = (root_fd, rel)
        self._real: Rules | None = None

    def _get(self) -> Rules:
        if self._real is None:
            self._real = rules_above(*self._args)
        return self._real

    def child(self, source: Source | None) -> Rules:
        return self._get().child(source)

    def ignored(self, path: str, is_dir: bool) -> bool:
        return self._get().ignored(path, is_dir)


def _counts(kids: dict[str, Entry]) -> tuple[int, int]:
    files = total = 0
    for e in kids.values():
        k = e[KIND]
        if k in "flb":
            files += 1
            if k == "f":
                total += e[SIZE]
    return files, total


def merge(prev: Snapshot, part: Snapshot) -> Snapshot:
    """``prev`` with the directories ``part`` listed again put in; the subtree of a directory
    that is no longer one is dropped. Counts are adjusted by what changed."""
    dirs = dict(prev.dirs)
    files, total = prev.files, prev.bytes
    for rel, kids in part.dirs.items():
        old = dirs.get(rel) or {}
        dirs[rel] = kids
        f0, b0 = _counts(old)
        f1, b1 = _counts(kids)
        files += f1 - f0
        total += b1 - b0
        for name, e in old.items():
            if e[KIND] == "d" and (kids.get(name) or ("",))[KIND] != "d":
                gone = join(rel, name)
                for d in [d for d in dirs if d == gone or d.startswith(gone + "/")]:
                    if d not in part.dirs:
                        f0, b0 = _counts(dirs.pop(d))
                        files -= f0
                        total -= b0
    return Snapshot(dirs, files, total, prev.nested, part.taken_ns, part.blob_bytes_added)


class Reader:
    """Reads and stores file content for one walk."""

    def __init__(self, objects: PackWriter, max_file_size: int, now_ns: int) -> None:
        self.objects = objects
        self.max_file_size = max_file_size
        self.cutoff = now_ns - RACY_NS
        self.added = 0

    def file(self, dir_fd: int, name: str, st: os.stat_result) -> Entry:
        for _ in range(3):
            got = self._once(dir_fd, name)
            if got is not None:
                if got[MODE] == 0:  # could not open: describe it by what lstat saw
                    return _stat_entry("u", st, got[DATA])
                return got
        return ("u", st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                "changing while read", False)  # fmt: skip

    def _once(self, dir_fd: int, name: str) -> Entry | None:
        try:
            got = open_regular(dir_fd, name)
        except OSError as err:
            return ("u", 0, 0, 0, 0, 0, f"unreadable ({err.strerror})", False)
        if got is None:
            return None  # gone or swapped since lstat: the caller retries through lstat
        fd, st = got
        try:
            if st.st_size > self.max_file_size:
                return _stat_entry("b", st)
            data = os.read(fd, st.st_size + 1) if st.st_size else os.read(fd, 1)
            st2 = os.fstat(fd)
        except OSError as err:
            return _stat_entry("u", st, f"unreadable ({err.strerror})")
        finally:
            os.close(fd)
        if len(data) != st.st_size or (st2.st_size, st2.st_mtime_ns, st2.st_ctime_ns) != (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
        ):
            return None
        h, added = self.objects.put(data)
        self.added += added
        racy = max(st.st_mtime_ns, st.st_ctime_ns) >= self.cutoff
        return ("f", stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                st.st_ino, h, racy)  # fmt: skip


def _stat_entry(kind: str, st: os.stat_result, data: str | None = None) -> Entry:
    return (kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, data, False)


def scan(
    root_fd: int,
    prev: Snapshot | None,
    objects: PackWriter,
    *,
    max_files: int,
    max_file_size: int,
    skip: tuple[int, int] | None = None,
    hard_files: int | None = None,
    on_dir: Callable[[int, str, bool], None] | None = None,
    known_only: bool = False,
    only: list[str] | None = None,
    clock: Callable[[], int] = time.time_ns,
) -> Snapshot:
    """Walk the project open at ``root_fd`` and return its snapshot.

    ``prev`` is the stat cache and decides what stays covered: a path covered in ``prev`` stays
    covered even if an ignore rule now matches it (git's rule for tracked files; it also keeps a
    command from hiding its changes by editing ``.gitignore``). Files past ``max_files`` raise
    TooManyFiles, unless ``hard_files`` is given: then they are listed as "c" (not covered) up to
    ``hard_files`` entries. ``skip`` is the (dev, ino) of a directory never entered (the store).
    ``on_dir(fd, rel, is_git)`` is called with the fd of every covered directory, and of each
    ``.git`` directory (with the rel of the directory holding it), before its entries are read
    (the store's inotify watches). With ``known_only``, only what ``prev`` covered is looked at:
    a new directory or file is listed as "c" and neither entered nor read (the bounded fallback
    after a run flooded the project).

    With ``only`` (directories covered in ``prev``), just those directories are listed again,
    and a subdirectory already covered in ``prev`` is not entered (a new one is walked whole):
    the result holds only the directories it listed, for ``merge``; its counts are partial.
    """
    now = clock()
    reader = Reader(objects, max_file_size, now)
    prev_dirs = prev.dirs if prev is not None else {}
    out: dict[str, dict[str, Entry]] = {}
    files = 0
    total = 0
    seen = 0
    nested: list[str] = []
    stack: list[tuple[str, int, Rules]] = []
    try:
        if only is None:
            root_rules = Rules()
            src = _exclude_source(root_fd, "")
            if src is not None:
                root_rules = root_rules.child(src)
            stack.append(("", os.dup(root_fd), root_rules))
        else:
            for rel in sorted(set(only), reverse=True):
                stack.append((rel, open_dir(root_fd, rel), LazyRules(root_fd, rel)))
        while stack:
            rel, fd, rules = stack.pop()
            try:
                if on_dir is not None:
                    on_dir(fd, rel, False)
                with os.scandir(fd) as it:
                    listing = list(it)
                before = prev_dirs.get(rel) or {}
                names = {e.name for e in listing}
                if rel and ".git" in names:
                    nested.append(rel)
                    rules = Rules()  # a nested repository has its own rules, like in git
                    src = _exclude_source(fd, rel)
                    if src is not None:
                        rules = rules.child(src)
                loaded: list[Rules] = []

                def here(
                    rules: Rules = rules, fd: int = fd, rel: str = rel, loaded: list[Rules] = loaded
                ) -> Rules:
                    if not loaded:
                        data = read_small(fd, ".gitignore", IGNORE_FILE_MAX)
                        loaded.append(rules.child(Source(rel, parse(data))) if data else rules)
                    return loaded[0]

                if ".gitignore" not in names:
                    loaded.append(rules)
                kids: dict[str, Entry] = {}
                for e in listing:
                    name = e.name
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    seen += 1
                    if hard_files is not None and seen > hard_files:
                        raise TooManyFiles(hard_files)
                    mode = st.st_mode
                    old = before.get(name)
                    if (  # the common case first: a file unchanged since the last walk
                        old is not None
                        and old[KIND] == "f"
                        and not old[RACY]
                        and old[MTIME] == st.st_mtime_ns
                        and old[CTIME] == st.st_ctime_ns
                        and old[SIZE] == st.st_size
                        and old[INO] == st.st_ino
                        and old[MODE] | stat.S_IFREG == mode
                    ):
                        files += 1
                        if files > max_files and hard_files is None:
                            raise TooManyFiles(max_files)
                        total += old[SIZE]
                        kids[name] = old
                        continue
                    fmt = stat.S_IFMT(mode)
                    path = join(rel, name)
                    if name == ".git":
                        kids[name] = _stat_entry("g", st)
                        if on_dir is not None and fmt == stat.S_IFDIR:
                            with contextlib.suppress(OSError):
                                gfd = os.open(name, DIR_FLAGS, dir_fd=fd)
                                try:
                                    on_dir(gfd, rel, True)
                                finally:
                                    os.close(gfd)
                    elif known_only and old is None:
                        kids[name] = _stat_entry("c", st)
                    elif fmt == stat.S_IFDIR:
                        if skip is not None and (st.st_dev, st.st_ino) == skip:
                            continue
                        if (old is None or old[KIND] != "d") and here().ignored(path, True):
                            kids[name] = _stat_entry("i", st)
                            continue
                        if only is not None and old is not None and old[KIND] == "d":
                            kids[name] = ("d", stat.S_IMODE(mode), 0, st.st_mtime_ns,
                                          st.st_ctime_ns, st.st_ino, None, False)  # fmt: skip
                            continue
                        try:
                            cfd = os.open(name, DIR_FLAGS, dir_fd=fd)
                        except OSError as err:
                            kids[name] = _stat_entry("u", st, f"unreadable ({err.strerror})")
                            continue
                        kids[name] = ("d", stat.S_IMODE(mode), 0, st.st_mtime_ns, st.st_ctime_ns,
                                      st.st_ino, None, False)  # fmt: skip
                        stack.append((path, cfd, here()))
                    elif fmt == stat.S_IFREG or fmt == stat.S_IFLNK:
                        if (old is None or old[KIND] not in "flbc") and here().ignored(path, False):
                            kids[name] = _stat_entry("i", st)
                            continue
                        files += 1
                        if files > max_files:
                            if hard_files is None:
                                raise TooManyFiles(max_files)
                            if old is None or old[KIND] not in "flb":
                                kids[name] = _stat_entry("c", st)
                                continue
                        key = (mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                        if (
                            old is not None
                            and not old[RACY]
                            and old[KIND] in "flb"
                            and key
                            == (
                                (old[MODE] | stat.S_IFREG) if old[KIND] == "f" else old[MODE],
                                old[SIZE],
                                old[MTIME],
                                old[CTIME],
                                old[INO],
                            )
                        ):
                            entry = old
                        elif fmt == stat.S_IFLNK:
                            try:
                                target = os.readlink(name, dir_fd=fd)
                            except OSError as err:
                                entry = _stat_entry("u", st, f"unreadable ({err.strerror})")
                            else:
                                entry = _stat_entry("l", st, target)
                        elif st.st_size > max_file_size:
                            entry = _stat_entry("b", st)
                        else:
                            entry = reader.file(fd, name, st)
                        if entry[KIND] == "f":
                            total += entry[SIZE]
                        kids[name] = entry
                    else:
                        kids[name] = _stat_entry("s", st)
                out[rel] = before if before and kids == before else kids
            finally:
                os.close(fd)
    finally:
        for _, fd, _ in stack:
            os.close(fd)
    return Snapshot(out, files, total, sorted(nested), now, reader.added)
