"""One walk of a project: what every path is, and the content of what is covered.

What is covered: regular files up to ``max_file_size`` (content and permission bits), symlinks
(target) and directories (mode), except ignored paths, which are covered up to a budget: each
ignored file up to ``ignored_file_max``, and up to ``ignored_total`` bytes of ignored content per
project. An ignored directory (the topmost ignored path, its *root*) is covered whole or not at
all: a root whose files do not fit in what is left of the budget is not entered, and is listed
with its size. Roots new to a walk are decided after the rest of the walk, in path order, so what
stays covered never depends on the order directories are listed in.

Decisions stick: a path covered in the previous snapshot stays covered even if an ignore rule now
matches it (git's rule for tracked files; a command cannot hide its changes by editing
``.gitignore``), and an ignored root keeps its decision until its own entry changes between runs.
The walk that ends a run (``finishing``) takes its ignore rules from the snapshot the run began
from (``RuleBook(frozen=...)``), and never enters a directory that the earlier walk did not enter
(ignored beyond the budget, unreadable, over the file-count cap): whatever is inside it existed
before the run and is not in the store, so it must never look like something the run added.

Safety: see snapshot.py. Nothing here writes into the project.

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
from dataclasses import dataclass

from .ignore import Rules, Source, parse
from .objects import PackWriter
from .snapshot import (
    CONTENT_KINDS,
    CTIME,
    DATA,
    DIR_FLAGS,
    IGNORE_FILE_MAX,
    INO,
    KIND,
    MODE,
    MTIME,
    RACY,
    RACY_NS,
    SIZE,
    Entry,
    Snapshot,
    TooManyFiles,
    born_after,
    join,
    open_dir,
    open_regular,
    read_small,
    same_state,
    stat_entry,
)

MIB = 1024 * 1024
# Entries a new ignored directory's size walk reads before it settles for a lower bound.
SIZE_ENTRIES = 20_000
OVER_FILE = "over undo.ignored_file_max"
OVER_TOTAL = "over undo.ignored_total"


@dataclass(frozen=True)
class WalkLimits:
    """What a walk covers (the ``undo`` options)."""

    max_files: int = 100_000
    max_file_size: int = 10 * MIB
    ignored_file_max: int = MIB
    ignored_total: int = 64 * MIB

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.max_file_size, self.ignored_file_max, self.ignored_total)


OnDir = Callable[..., None]


class RuleBook:
    """Where a walk's ignore rules come from: the files on disk (a run's start: the state before
    it), or a snapshot's record of them (``frozen``: a run's end takes the rules from before the
    run, so a run cannot change what undo covers). Records what it used, for the snapshot."""

    def __init__(self, frozen: Snapshot | None = None) -> None:
        self.frozen = frozen
        self.nested = set(frozen.nested) if frozen is not None else None
        self.gitignore: dict[str, bytes] = {}
        self.exclude: dict[str, bytes] = {}

    def is_repo(self, rel: str, names: set[str]) -> bool:
        """Whether directory ``rel`` is the work tree of a repository nested in the project."""
        if not rel:
            return False
        return rel in self.nested if self.nested is not None else ".git" in names

    def own(self, fd: int, rel: str) -> bytes | None:
        """The ``.gitignore`` of directory ``rel`` (open at ``fd``)."""
        if self.frozen is not None:
            data = self.frozen.gitignore.get(rel)
        else:
            data = read_small(fd, ".gitignore", IGNORE_FILE_MAX)
        if data:
            self.gitignore[rel] = data
        return data or None

    def exclude_of(self, fd: int, rel: str) -> bytes | None:
        """``.git/info/exclude`` of the repository whose work tree is ``rel``."""
        data = self.frozen.exclude.get(rel) if self.frozen is not None else read_exclude(fd)
        if data:
            self.exclude[rel] = data
        return data or None

    def base(self, fd: int, rel: str) -> Rules:
        """The rules a repository's work tree starts from (its ``info/exclude``)."""
        data = self.exclude_of(fd, rel)
        return Rules().child(Source(rel, parse(data))) if data else Rules()

    def above(self, root_fd: int, rel: str) -> Rules:
        """The rules that apply to the entries of directory ``rel`` from the directories above
        it (its own ``.gitignore`` is added by the walk), as a whole walk would build them."""
        rules = self.base(root_fd, "")
        if not rel:
            return rules
        fd = os.dup(root_fd)
        try:
            acc = ""
            for part in rel.split("/"):
                if acc:
                    names = {".git"} if _has_git(fd) else set()
                    if self.is_repo(acc, names):  # a nested repository restarts the rules
                        rules = self.base(fd, acc)
                data = self.own(fd, acc)
                if data:
                    rules = rules.child(Source(acc, parse(data)))
                nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nfd
                acc = join(acc, part)
        finally:
            os.close(fd)
        return rules


def ignored_above(root_fd: int, rel: str) -> str | None:
    """The first directory on the way to ``rel`` (itself included) that the ignore rules on
    disk ignore, or None: a walk that starts inside it would not know that all of it is."""
    if not rel:
        return None
    book = RuleBook()
    parts = rel.split("/")
    for i in range(len(parts)):
        parent, here = "/".join(parts[:i]), "/".join(parts[: i + 1])
        rules = book.above(root_fd, parent)
        fd = open_dir(root_fd, parent)
        try:
            data = book.own(fd, parent)
        finally:
            os.close(fd)
        if data:
            rules = rules.child(Source(parent, parse(data)))
        if rules.ignored(here, True):
            return here
    return None


def _has_git(fd: int) -> bool:
    try:
        os.stat(".git", dir_fd=fd, follow_symlinks=False)
        return True
    except OSError:
        return False


def read_exclude(dir_fd: int) -> bytes | None:
    """``.git/info/exclude`` of the repository whose work tree is the directory ``dir_fd``."""
    fds = []
    try:
        fd = dir_fd
        for part in (".git", "info"):
            fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            fds.append(fd)
        return read_small(fd, "exclude", IGNORE_FILE_MAX)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


class Reader:
    """Reads and stores file content for one walk."""

    def __init__(self, objects: PackWriter, now_ns: int) -> None:
        self.objects = objects
        self.cutoff = now_ns - RACY_NS
        self.added = 0

    def file(self, dir_fd: int, name: str, st: os.stat_result, cap: int, over: Entry) -> Entry:
        """The entry of a regular file, its content stored; ``over`` when it is larger than
        ``cap``; "u" when it cannot be read or keeps changing while it is read."""
        for _ in range(3):
            got = self._once(dir_fd, name, cap, over)
            if got is not None:
                return got
        return stat_entry("u", st, "changing while read")

    def _once(self, dir_fd: int, name: str, cap: int, over: Entry) -> Entry | None:
        try:
            got = open_regular(dir_fd, name)
        except OSError as err:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                return None
            return stat_entry("u", st, f"unreadable ({err.strerror})")
        if got is None:
            return None  # gone or swapped since lstat: the caller retries through lstat
        fd, st = got
        try:
            if st.st_size > cap:
                return (over[KIND], st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                        st.st_ino, over[DATA], False)  # fmt: skip
            data = os.read(fd, st.st_size + 1) if st.st_size else os.read(fd, 1)
            st2 = os.fstat(fd)
        except OSError as err:
            return stat_entry("u", st, f"unreadable ({err.strerror})")
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


def size_tree(dir_fd: int, skip: tuple[int, int] | None, file_max: int) -> tuple[int, int, bool]:
    """(bytes of the files up to ``file_max``, bytes of all files, complete) of the tree open at
    ``dir_fd``; incomplete after ``SIZE_ENTRIES`` entries (the sizes are then lower bounds)."""
    eligible = total = seen = 0
    stack = [os.dup(dir_fd)]
    try:
        while stack:
            fd = stack.pop()
            try:
                with os.scandir(fd) as it:
                    for e in it:
                        seen += 1
                        if seen > SIZE_ENTRIES:
                            return eligible, total, False
                        try:
                            st = e.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        if stat.S_ISREG(st.st_mode):
                            total += st.st_size
                            if st.st_size <= file_max:
                                eligible += st.st_size
                        elif stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) != skip:
                            with contextlib.suppress(OSError):
                                stack.append(os.open(e.name, DIR_FLAGS, dir_fd=fd))
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        for fd in stack:
            os.close(fd)
    return eligible, total, True


@dataclass
class _Frame:
    """One directory on the walk's stack."""

    rel: str
    fd: int
    rules: Rules
    ig: str | None  # the covered ignored root this directory lies in (None: not ignored)
    fresh: bool = False  # a root covered by this walk: its files were counted when it was sized


def _unchanged(old: Entry | None, st: os.stat_result) -> bool:
    return old is not None and (old[MTIME], old[CTIME], old[INO]) == (
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
    )


class _Walk:
    """The state of one ``scan``."""

    def __init__(
        self,
        root_fd: int,
        prev: Snapshot | None,
        objects: PackWriter,
        limits: WalkLimits,
        book: RuleBook,
        finishing: bool,
        began_ns: int,
        skip: tuple[int, int] | None,
        hard_files: int | None,
        on_dir: OnDir | None,
        known_only: bool,
        only: list[str] | None,
        roots: tuple[str, ...],
        now: int,
    ) -> None:
        self.root_fd = root_fd
        self.prev = prev
        self.limits = limits
        self.book = book
        self.finishing = finishing
        self.began_ns = began_ns
        self.skip = skip
        self.hard_files = hard_files
        self.on_dir = on_dir
        self.known_only = known_only
        self.only = only
        self.roots = roots
        self.reader = Reader(objects, now)
        self.prev_dirs = prev.dirs if prev is not None else {}
        self.prev_roots = prev.ign if prev is not None else {}
        # Decisions about ignored roots hold while the limits they were made under hold.
        self.keep = prev is not None and prev.limits == limits.key
        self.roots_in: dict[str, set[str]] = {}
        for path in self.prev_roots:
            parent, _, name = path.rpartition("/")
            self.roots_in.setdefault(parent, set()).add(name)
        self.max_files = limits.max_files if not known_only and only is None else 1 << 62
        self.out: dict[str, dict[str, Entry]] = {}
        self.out_ig: dict[str, str | None] = {}
        self.ign: dict[str, int] = {}
        self.pending: list[tuple[str, str, str]] = []  # (path, parent rel, name)
        self.stack: list[_Frame] = []
        self.files = self.total = self.seen = 0
        self.nested: list[str] = []
        self.stale = False
        self.links: dict[str, int] = {}
        self.base_used = 0  # ``only``: the budget spent outside the directories listed again

    # -- counting --------------------------------------------------------------------------------

    def count(self, ent: Entry) -> Entry:
        if ent[KIND] in "flb":
            self.files += 1
            if self.files > self.max_files and self.hard_files is None:
                raise TooManyFiles(self.limits.max_files)
        if ent[KIND] == "f":
            self.total += ent[SIZE]
        return ent

    def over_count(self, old: Entry | None) -> bool:
        """Past ``max_files`` after a run flooded the project: new files are not read."""
        return (
            self.hard_files is not None
            and self.files >= self.limits.max_files
            and (old is None or old[KIND] not in "flb")
        )

    # -- the walk --------------------------------------------------------------------------------

    def start(self) -> None:
        if self.only is None and self.roots == ("",):
            self.stack.append(_Frame("", os.dup(self.root_fd), self.book.base(self.root_fd, ""),
                                     None))  # fmt: skip
            return
        prev = self.prev
        todo = set(self.only if self.only is not None else self.roots)
        for rel in sorted(todo, reverse=True):
            root = prev.ignored_root(rel) if rel and prev is not None else None
            try:
                fd = open_dir(self.root_fd, rel)
            except OSError:
                # Gone since: listing its parent again drops it (a parent that is not listed
                # again means the watcher missed something: the caller walks everything).
                if self.only is not None and rel and rel.rpartition("/")[0] in todo:
                    continue
                raise
            try:
                rules = self.book.above(self.root_fd, rel) if root is None else Rules()
            except BaseException:
                os.close(fd)
                raise
            self.stack.append(_Frame(rel, fd, rules, root))

    def run(self) -> None:
        while self.stack:
            fr = self.stack.pop()
            try:
                self.directory_listing(fr)
            finally:
                os.close(fr.fd)

    def directory_listing(self, fr: _Frame) -> None:
        rel, fd = fr.rel, fr.fd
        if self.on_dir is not None:
            self.on_dir(fd, rel, False)
        with os.scandir(fd) as it:
            listing = list(it)
        before = self.prev_dirs.get(rel) or {}
        names = {e.name for e in listing}
        rules = fr.rules
        if fr.ig is None and rel and ".git" in names:
            self.nested.append(rel)
        if fr.ig is None and self.book.is_repo(rel, names):
            rules = self.book.base(fd, rel)  # a nested repository has its own rules, as in git
        loaded: list[Rules] = []

        def here() -> Rules:
            if not loaded:
                if fr.ig is not None:
                    loaded.append(rules)
                else:
                    data = self.book.own(fd, rel)
                    loaded.append(rules.child(Source(rel, parse(data))) if data else rules)
            return loaded[0]

        roots_here = self.roots_in.get(rel, set())
        kids: dict[str, Entry] = {}
        for e in listing:
            name = e.name
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            self.seen += 1
            if self.hard_files is not None and self.seen > self.hard_files:
                raise TooManyFiles(self.hard_files)
            old = before.get(name)
            if (  # the common case first: a file unchanged since the last walk
                old is not None
                and old[KIND] == "f"
                and not old[RACY]
                and old[MTIME] == st.st_mtime_ns
                and old[CTIME] == st.st_ctime_ns
                and old[SIZE] == st.st_size
                and old[INO] == st.st_ino
                and old[MODE] | stat.S_IFREG == st.st_mode
            ):
                kids[name] = self.count(old)
                if st.st_nlink > 1:
                    self.links[join(rel, name)] = st.st_ino
                if name in roots_here:
                    path = join(rel, name)
                    self.ign[path] = self.prev_roots[path]
                continue
            ent = self.entry(fr, name, st, old, here, name in roots_here)
            if (
                self.finishing
                and ent[KIND] in "bsui"
                and not stat.S_ISDIR(ent[MODE])
                and (old is None or old[INO] != ent[INO])
                and born_after(fd, name, ent[INO], self.began_ns)
            ):
                ent = (*ent[:7], True)
            kids[name] = ent
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                self.links[join(rel, name)] = st.st_ino
        if self.finishing and not same_state(kids.get(".gitignore"), before.get(".gitignore")):
            self.stale = True  # an ignore file changed: the next start classifies again
        self.out[rel] = before if before and kids == before else kids
        self.out_ig[rel] = fr.ig

    def entry(
        self,
        fr: _Frame,
        name: str,
        st: os.stat_result,
        old: Entry | None,
        here: Callable[[], Rules],
        was_root: bool,
    ) -> Entry:
        fmt = stat.S_IFMT(st.st_mode)
        path = join(fr.rel, name)
        if name == ".git":
            if self.on_dir is not None and fmt == stat.S_IFDIR:
                self.watch_holder(fr.fd, name, fr.rel)
            return stat_entry("g", st)
        if self.known_only and old is None:
            return stat_entry("c", st)
        if fmt == stat.S_IFDIR:
            if self.skip is not None and (st.st_dev, st.st_ino) == self.skip:
                return stat_entry("s", st, "the undo store")
            return self.subdir(fr, name, path, st, old, here, was_root)
        if fmt not in (stat.S_IFREG, stat.S_IFLNK):
            return stat_entry("s", st)
        if self.over_count(old):
            return stat_entry("c", st)
        if fmt == stat.S_IFLNK:
            if was_root or (fr.ig is None and old is None and here().ignored(path, False)):
                self.ign[path] = 0  # an ignored link: its target is kept, whatever the budget
            return self.count(self.link(fr.fd, name, st, old))
        # A regular file: is it ignored, and does an earlier decision about it hold?
        if fr.ig is not None:  # inside a covered ignored directory
            if (old is not None and old[KIND] == "f") or fr.fresh:
                return self.regular(fr.fd, name, st, old, self.limits.ignored_file_max)
            if old is not None and old[KIND] == "i" and (self.finishing or _unchanged(old, st)):
                return stat_entry("i", st, old[DATA])
            self.pending.append((path, fr.rel, name))
            return stat_entry("i", st, OVER_TOTAL)
        if was_root and not self.finishing and not here().ignored(path, False):
            was_root = False  # not ignored any more (the rules changed): covered as any file
        if was_root:
            if self.keep and (self.finishing or _unchanged(old, st)):
                self.ign[path] = st.st_size
                if old is not None and old[KIND] == "i":
                    return stat_entry("i", st, old[DATA])
                return self.regular(fr.fd, name, st, old, self.limits.ignored_file_max)
            if self.finishing or here().ignored(path, False):
                self.pending.append((path, fr.rel, name))
                return stat_entry("i", st, OVER_TOTAL)
        elif old is None and here().ignored(path, False):
            self.pending.append((path, fr.rel, name))
            return stat_entry("i", st, OVER_TOTAL)
        return self.regular(fr.fd, name, st, old, self.limits.max_file_size, "b")

    def regular(
        self,
        fd: int,
        name: str,
        st: os.stat_result,
        old: Entry | None,
        cap: int,
        over_kind: str = "i",
    ) -> Entry:
        over: Entry = (over_kind, 0, 0, 0, 0, 0, OVER_FILE if over_kind == "i" else None, False)
        key = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if (
            old is not None
            and old[KIND] in ("f", over_kind)
            and not (old[KIND] == "f" and old[RACY])
            and key
            == (
                (old[MODE] | stat.S_IFREG) if old[KIND] == "f" else old[MODE],
                old[SIZE],
                old[MTIME],
                old[CTIME],
                old[INO],
            )
        ):
            ent = old
        elif st.st_size > cap:
            ent = (over_kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                   over[DATA], False)  # fmt: skip
        else:
            ent = self.reader.file(fd, name, st, cap, over)
        return self.count(ent)

    @staticmethod
    def link(fd: int, name: str, st: os.stat_result, old: Entry | None) -> Entry:
        if old is not None and old[KIND] == "l" and _unchanged(old, st):
            return old
        try:
            return stat_entry("l", st, os.readlink(name, dir_fd=fd))
        except OSError as err:
            return stat_entry("u", st, f"unreadable ({err.strerror})")

    def subdir(
        self,
        fr: _Frame,
        name: str,
        path: str,
        st: os.stat_result,
        old: Entry | None,
        here: Callable[[], Rules],
        was_root: bool,
    ) -> Entry:
        mode = st.st_mode
        d_entry: Entry = ("d", stat.S_IMODE(mode), 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                          None, False)  # fmt: skip
        same_dir = old is not None and old[INO] == st.st_ino and old[KIND] != "d"
        if self.finishing and same_dir and old is not None and old[KIND] in "iuc":
            # Not entered before the run: what is in it existed then and is not in the store.
            if old[KIND] == "i":
                if was_root:
                    self.ign[path] = self.prev_roots[path]
                if self.on_dir is not None:
                    self.watch_holder(fr.fd, name, fr.rel, path)
            size = old[SIZE] if old[KIND] == "i" else st.st_size
            return (old[KIND], mode, size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, old[DATA],
                    False)  # fmt: skip
        ig = fr.ig
        if ig is None and was_root and not self.finishing and not here().ignored(path, True):
            was_root = False  # not ignored any more (the rules changed): covered as any directory
            if old is not None and old[KIND] == "i":
                old = None  # decided anew
        if ig is None:
            if was_root and self.keep and (self.finishing or _unchanged(old, st)):
                self.ign[path] = self.prev_roots[path]
                if old is not None and old[KIND] == "i":
                    if self.on_dir is not None:
                        self.watch_holder(fr.fd, name, fr.rel, path)
                    return (old[KIND], mode, old[SIZE], st.st_mtime_ns, st.st_ctime_ns,
                            st.st_ino, old[DATA], False)  # fmt: skip
                ig = path
            elif was_root and old is not None and old[KIND] == "d" and self.finishing:
                self.ign[path] = self.prev_roots[path]
                ig = path
            elif (was_root or old is None or old[KIND] != "d") and here().ignored(path, True):
                self.pending.append((path, fr.rel, name))
                return ("i", mode, 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, OVER_TOTAL, False)
        if self.only is not None and old is not None and old[KIND] == "d":
            return d_entry  # known: not entered again
        try:
            cfd = os.open(name, DIR_FLAGS, dir_fd=fr.fd)
        except OSError as err:
            return stat_entry("u", st, f"unreadable ({err.strerror})")
        rules = here() if ig is None else Rules()
        self.stack.append(_Frame(path, cfd, rules, ig, fr.fresh and ig == fr.ig))
        return d_entry

    def watch_holder(self, fd: int, name: str, rel: str, hole: str | None = None) -> None:
        """Watch ``name`` in ``rel`` as a directory not listed; ``hole``: it is an ignored tree
        not entered (watched whole)."""
        assert self.on_dir is not None
        with contextlib.suppress(OSError):
            gfd = os.open(name, DIR_FLAGS, dir_fd=fd)
            try:
                self.on_dir(gfd, rel, True, hole)
            finally:
                os.close(gfd)

    # -- new ignored content, after the rest -----------------------------------------------------

    def ig_bytes(self, rel: str, kids: dict[str, Entry]) -> int:
        inside = self.out_ig.get(rel) is not None
        n = 0
        for name, e in kids.items():
            if e[KIND] == "f" and (inside or join(rel, name) in self.ign):
                n += e[SIZE]
        return n

    def settle(self) -> None:
        """Decide new ignored content in path order while the budget lasts: a file is kept when
        it fits; a directory when all of its files up to ``ignored_file_max`` fit together."""
        if not self.pending:
            return
        used = self.base_used + sum(self.ig_bytes(r, k) for r, k in self.out.items())
        left = self.limits.ignored_total - used
        for path, rel, name in sorted(self.pending, key=lambda p: os.fsencode(p[0])):
            kids = self.out.get(rel)
            if kids is None or name not in kids:
                continue
            if kids is self.prev_dirs.get(rel):
                kids = self.out[rel] = dict(kids)
            try:
                pfd = open_dir(self.root_fd, rel)
            except OSError:
                continue
            try:
                got = self.settle_one(pfd, path, rel, name, kids[name], left)
                if got is None:
                    continue
                ent, spent = got
                left -= spent
                old = (self.prev_dirs.get(rel) or {}).get(name)
                if (
                    self.finishing
                    and ent[KIND] == "i"
                    and not stat.S_ISDIR(ent[MODE])
                    and (old is None or old[INO] != ent[INO])
                    and born_after(pfd, name, ent[INO], self.began_ns)
                ):
                    ent = (*ent[:7], True)
                kids[name] = ent
            finally:
                os.close(pfd)
            self.run()  # a directory just covered: walk it before the next decision

    def settle_one(
        self, pfd: int, path: str, rel: str, name: str, temp: Entry, left: int
    ) -> tuple[Entry, int] | None:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except OSError:
            return None
        if st.st_ino != temp[INO]:
            return None
        lim = self.limits
        if stat.S_ISREG(st.st_mode):
            if self.out_ig.get(rel) is None:
                self.ign[path] = st.st_size  # an ignored root (not inside an ignored directory)
            if st.st_size > lim.ignored_file_max:
                return stat_entry("i", st, OVER_FILE), 0
            if st.st_size > left:
                return stat_entry("i", st, OVER_TOTAL), 0
            over: Entry = ("i", 0, 0, 0, 0, 0, OVER_FILE, False)
            ent = self.count(self.reader.file(pfd, name, st, lim.ignored_file_max, over))
            return ent, ent[SIZE] if ent[KIND] == "f" else 0
        if not stat.S_ISDIR(st.st_mode):
            return None
        try:
            cfd = os.open(name, DIR_FLAGS, dir_fd=pfd)
        except OSError as err:
            return stat_entry("u", st, f"unreadable ({err.strerror})"), 0
        try:
            eligible, size, complete = size_tree(cfd, self.skip, lim.ignored_file_max)
        except BaseException:
            os.close(cfd)
            raise
        self.ign[path] = size if complete else -size
        if not complete or eligible > left:
            if self.on_dir is not None:
                with contextlib.suppress(OSError):
                    self.on_dir(cfd, rel, True, path)
            os.close(cfd)
            return ("i", st.st_mode, size if complete else -size, st.st_mtime_ns, st.st_ctime_ns,
                    st.st_ino, OVER_TOTAL, False), 0  # fmt: skip
        self.stack.append(_Frame(path, cfd, Rules(), path, fresh=True))
        return ("d", stat.S_IMODE(st.st_mode), 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                None, False), eligible  # fmt: skip

    def snapshot(self, now: int) -> Snapshot:
        holes: dict[str, str] = {}
        prev_holes = self.prev.holes if self.prev is not None else {}
        used = 0
        for rel, kids in self.out.items():
            if kids is self.prev_dirs.get(rel) and self.prev is not None:
                if rel in prev_holes:
                    holes[rel] = prev_holes[rel]
            else:
                kinds = {e[KIND] for e in kids.values() if e[KIND] not in CONTENT_KINDS}
                if kinds:
                    holes[rel] = "".join(sorted(kinds))
            used += self.ig_bytes(rel, kids)
        frozen = self.book.frozen
        whole = self.only is None
        return Snapshot(
            self.out,
            self.files,
            self.total,
            sorted(self.nested),
            now,
            self.reader.added,
            dict(frozen.gitignore) if whole and frozen is not None else dict(self.book.gitignore),
            dict(frozen.exclude) if frozen is not None else dict(self.book.exclude),
            self.ign,
            used,
            holes,
            self.stale,
            self.limits.key,
            self.roots,
            self.links,
        )


def scan(
    root_fd: int,
    prev: Snapshot | None,
    objects: PackWriter,
    *,
    limits: WalkLimits,
    rules: RuleBook | None = None,
    finishing: bool = False,
    began_ns: int = 0,
    skip: tuple[int, int] | None = None,
    hard_files: int | None = None,
    on_dir: OnDir | None = None,
    known_only: bool = False,
    only: list[str] | None = None,
    roots: tuple[str, ...] = ("",),
    clock: Callable[[], int] = time.time_ns,
) -> Snapshot:
    """Walk the project open at ``root_fd`` and return its snapshot.

    ``prev`` is the stat cache and decides what stays covered (see the module docstring).
    ``rules`` says where ignore rules come from (default: the files on disk). ``finishing``: the
    walk ends a run that began at ``began_ns`` (directories not entered before stay closed; a new
    file whose content is not kept is marked when it was created during the run). Files past
    ``max_files`` raise TooManyFiles, unless ``hard_files`` is given: then they are listed as "c"
    (not covered) up to ``hard_files`` entries. ``skip`` is the (dev, ino) of a directory never
    entered (the store). ``on_dir(fd, rel, holder)`` is called with the fd of every covered
    directory before its entries are read, and (``holder`` True) of each ``.git`` directory and
    each ignored directory not entered, with the rel of the directory holding it (the store's
    inotify watches). With ``known_only``, only what ``prev`` covered is looked at: a new
    directory or file is listed as "c" and neither entered nor read (the bounded fallback after a
    run flooded the project).

    With ``only`` (directories covered in ``prev``), just those directories are listed again,
    and a subdirectory already covered in ``prev`` is not entered (a new one is walked whole):
    the result holds only the directories it listed, for ``merge``; its counts (``files``,
    ``bytes``, ``ign_used``) are those of the directories it listed. ``roots``: the
    directories a whole walk starts from (the scope; ``("",)`` is the project).
    """
    now = clock()
    w = _Walk(
        root_fd,
        prev,
        objects,
        limits,
        rules or RuleBook(),
        finishing,
        began_ns,
        skip,
        hard_files,
        on_dir,
        known_only,
        only,
        roots,
        now,
    )
    if only is not None and prev is not None:
        from .snapshot import ignored_bytes

        w.base_used = prev.ign_used - sum(
            ignored_bytes(prev, rel, prev.dirs[rel]) for rel in set(only) if rel in prev.dirs
        )
    try:
        w.start()
        w.run()
        w.settle()
    finally:
        for fr in w.stack:
            os.close(fr.fd)
    return w.snapshot(now)
