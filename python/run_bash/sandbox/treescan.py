"""Finding repositories in a tree the way git discovers them: a ``.git`` entry, or a directory
that is itself a git directory.

``TreeScan`` walks the trees a run can write after each run; an unchanged directory (same inode,
ctime and mtime) is not listed again, so a walk of an unchanged tree costs one ``lstat`` per
directory, and a tree inotify says is unchanged is not walked at all. The same walk reports the
entries of the names it is asked for (``want``, ``find_named``): the files tools look up in the
directory they run in, kept at every level of a writable tree (``hostread.py``).
``nested_git_dirs`` lists the worktree and submodule git directories inside a common directory.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from run_bash import fsdeps, inotify
from run_bash.paths import Tops
from run_bash.sandbox import nofollow

# Nested submodule git dirs (modules/a/modules/b/...) and worktree admin dirs looked at per repo.
MAX_GIT_DIRS = 512
# Directories of the trees walked to find repositories (one lstat each when unchanged).
MAX_SCAN_DIRS = 100_000
# The check after a run that made its tree too large for that walk walks on (``walk_on``): what a
# run made costs its check what it cost the run to make. Past this many directories, what is
# left unwalked goes to the quarantine.
MAX_CHECK_DIRS = 1_000_000


@dataclass(frozen=True)
class _DirInfo:
    """One directory of a scanned tree, as it was listed."""

    ident: tuple[int, int, int]  # (inode, ctime_ns, mtime_ns): any entry added/removed changes it
    dotgit: bool
    bare: bool
    subdirs: tuple[str, ...]  # full paths of the subdirectories to walk
    links: frozenset[tuple[str, str]] = frozenset()  # (name, text) of each symbolic link in it
    named: tuple[str, ...] = ()  # its entries (of any type) whose name the scan wants
    names_gen: int = 0  # the scan's names when it was listed (``TreeScan.want``)
    settled: bool = True  # its change time was older than ``SETTLED_NS`` when it was listed


def looks_like_git_dir(names: Iterable[str] | str) -> bool:
    """Whether a directory has what git requires of a git directory: ``HEAD`` with ``objects``
    and ``refs``, or ``HEAD`` with a ``commondir`` link (a linked worktree's git directory, whose
    objects and refs live in the common directory). Names only: this finds a superset of what git
    accepts (each one found is judged)."""
    if isinstance(names, str):
        try:
            names = os.listdir(names)
        except OSError:
            return False
    have = set(names)
    return "HEAD" in have and ({"objects", "refs"} <= have or "commondir" in have)


# What changes a directory's listing (``_DirInfo``): entries created, removed or renamed, the
# directory itself removed, moved or its mode changed.
STRUCTURE = (
    inotify.IN_CREATE
    | inotify.IN_DELETE
    | inotify.IN_MOVED_FROM
    | inotify.IN_MOVED_TO
    | inotify.IN_DELETE_SELF
    | inotify.IN_MOVE_SELF
    | inotify.IN_ATTRIB
)
# New links kept for ``links_since`` (beyond it the oldest are dropped, and a mark older than
# what is kept gets every link there is).
MAX_BORN = 100_000
# A listing of a directory whose change time was younger than this is not reused: two changes
# within one timestamp tick (a few milliseconds on most kernels; a second or two on some file
# systems) leave the same (inode, ctime, mtime), so a name made just after the listing would
# not be seen (ctime only: user space cannot set it, nor move it into the future).
SETTLED_NS = 2_000_000_000
# Trees with more directories than this are walked every time (each watched directory costs
# kernel memory, and the change store watches the project's directories too).
MAX_WATCHED_DIRS = 20_000


@dataclass(frozen=True)
class _Walk:
    """The last walk of one tree: what it found, and the directories it saw with the change
    count of each at that time (``TreeScan``)."""

    found: tuple[tuple[str, str], ...]
    truncated: bool
    dirs: dict[str, int]  # directory -> its change count when walked
    seq: int  # the scan's event count when walked
    mounts: int
    named: tuple[str, ...] = ()  # every entry of a wanted name it saw


class TreeScan:
    """Finds every ``.git`` entry and bare repository under a tree. A directory whose (inode,
    ctime, mtime) is unchanged since the last walk is not listed again (ctime cannot be set back
    from user space), so a walk of an unchanged tree costs one lstat per directory.

    Where inotify sees every change of the tree (``inotify.sees_every_change``), each directory
    walked is watched for what changes its listing (``STRUCTURE``), and a tree none of whose
    directories changed since its last walk is not walked again at all: its last result is
    returned. Events are read when ``find`` is called, so a change made before the call is
    always seen. Lost events (the queue overflowed), a watch that could not be added, a change
    of the mount table, or a tree on a filesystem changed elsewhere (NFS, FUSE) mean a walk.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        # The names whose entries the walks report, and their generation (``want``).
        self._names: tuple[frozenset[str], int] = (frozenset(names), 0)
        self._dirs: dict[str, _DirInfo] = {}
        self._lock = threading.Lock()
        self._find_lock = threading.Lock()
        self._ino: inotify.Inotify | None = None
        self._no_ino = False
        self._wd_of: dict[str, int] = {}  # watched directory -> wd
        self._dir_of: dict[int, str] = {}  # wd -> directory
        self._gen: dict[str, int] = {}  # directory -> how many changes were seen in it
        self._seq = 0  # every event seen
        self._walks: dict[tuple[str, frozenset[str]], _Walk] = {}
        self._local: dict[int, bool] = {}  # st_dev -> inotify sees every change there
        # Symbolic links that appeared (new, or with a new text) since a tree's first walk, each
        # with its number in the order found (``links_since``).
        self._born: deque[tuple[int, str, str]] = deque(maxlen=MAX_BORN)
        self._born_n = 0
        self._rooted: set[str] = set()  # trees walked at least once
        self._raced = False  # ``take_raced``
        self._content: set[str] = set()  # trees whose file writes are events too (``find``)
        self._unfollowed: set[str] = set()  # trees inotify cannot follow (``follows``)
        # Called when a walk read events (``events_fd`` is drained for whoever waits on it).
        self.on_events: list[Callable[[], None]] = []
        self._content_wds: set[str] = set()  # directories watched for writes

    def find(
        self, root: str, skip: frozenset[str] = frozenset(), content: bool = False
    ) -> tuple[list[tuple[str, str]], bool]:
        """``(path, kind)`` for every ``.git`` entry (kind "dotgit", the entry's path) and bare
        repository directory (kind "bare") under ``root``; symlinked directories are not entered,
        nor those in ``skip`` (kept read-only whole: nothing can appear in them). The flag says
        the walk stopped at ``MAX_SCAN_DIRS`` directories. ``content``: from now on a write to a
        file in a directory of this tree is an event too (``events_fd``), not only a new name (a
        new repository's git directory, whose config a background run could arm later)."""
        if content:
            with self._lock:
                self._content.add(root)
        with self._find_lock, fsdeps.unrecorded():
            found, _named, truncated = self._find(root, skip)
        # A computation that used this answer holds while the tree gives the same one.
        same = sorted(found)
        fsdeps.add_check(lambda: (sorted(self.find(root, skip)[0]), truncated) == (same, False))
        return found, truncated

    def find_named(
        self, root: str, skip: frozenset[str] = frozenset()
    ) -> tuple[list[tuple[str, str]], list[str], bool]:
        """``find``, and the path of every entry under ``root`` (a file, a directory, a link:
        whatever it is) whose name is one of the wanted ones (``want``), from the same walk at no
        extra cost: each directory's are kept with its listing."""
        with self._find_lock, fsdeps.unrecorded():
            found, named, truncated = self._find(root, skip)
        same = (sorted(found), sorted(named))
        fsdeps.add_check(lambda: (self._same_named(root, skip), truncated) == (same, False))
        return found, named, truncated

    def _same_named(
        self, root: str, skip: frozenset[str]
    ) -> tuple[list[tuple[str, str]], list[str]]:
        found, named, _truncated = self.find_named(root, skip)
        return sorted(found), sorted(named)

    def want(self, names: Iterable[str]) -> None:
        """From now on the walks also report the entries of ``names`` (``find_named``). A name
        not wanted before has every directory listed again at its next walk (its links are
        compared with the earlier listing as usual: none of them is new for it)."""
        more = frozenset(names)
        if more <= self._names[0]:
            return
        with self._find_lock:
            have, gen = self._names
            self._names = (have | more, gen + 1)
            self._walks.clear()

    def link_mark(self) -> int:
        """The number of the last new link found: ``links_since`` that mark gives the ones
        found later. Take it after the walks that see what was there before."""
        with self._lock:
            return self._born_n

    def links_since(self, mark: int, roots: Iterable[str]) -> tuple[list[tuple[str, str]], int]:
        """``(path, link text)`` of every symbolic link that appeared under ``roots`` (created, or
        given a new text) and was found after ``mark``, and the mark they go up to (``links_since``
        that one gives what is found later, by any walk, also one of another thread meanwhile).
        Found by the walks (``find``): a link made after the last walk of its tree is not in it
        yet. When more than ``MAX_BORN`` appeared since ``mark``, every link the walks see under
        ``roots`` (fail closed)."""
        tops = Tops(roots)
        with self._lock:
            if self._born_n - len(self._born) > mark:
                # More appeared since than are kept: every link there now, the run's or not.
                links = [
                    (d + "/" + name, text)
                    for d, info in self._dirs.items()
                    if d in tops
                    for name, text in sorted(info.links)
                ]
            else:
                links = [(p, t) for n, p, t in self._born if n > mark and p in tops]
            return links, self._born_n

    def read_events(self) -> int:
        """Read the events that came (as a walk does first); the number of events read so far,
        by any caller: a look that reads more later than this read changes it saw while it was
        looking (``events_read``)."""
        with self._find_lock:
            self._read_events()
            return self._seq

    def events_read(self) -> int:
        """The number of events read so far (``read_events``)."""
        return self._seq

    def known(self) -> frozenset[str]:
        """Every directory a walk has seen (the trees as walked before; kept until a complete
        walk of their tree finds them gone)."""
        with self._lock:
            return frozenset(self._dirs)

    def walk_on(
        self,
        root: str,
        skip: frozenset[str],
        old: frozenset[str],
        limit: int = MAX_CHECK_DIRS,
        named: list[str] | None = None,
    ) -> tuple[list[tuple[str, str]], list[str], list[tuple[str, str]]]:
        """``find`` for a tree a run made too large for it (more than ``MAX_SCAN_DIRS``
        directories, when it had fewer before the run): a walk of the whole tree, not kept and
        not watched, the directories in ``old`` (the tree as it was walked before the run, which
        was all of it) first, so what is left at ``limit`` directories is what appeared since.
        ``(found, left, links)``: found as ``find``'s; the topmost directory of each branch left
        unwalked that is not in ``old`` (none when the walk ended); and ``(path, link text)`` of
        each symbolic link the usual walks have not seen (every link of a directory not in
        ``old``, and those of the others that their last walk did not list). ``named`` gets the
        entries of the wanted names (``find_named``) in every directory walked."""
        found: list[tuple[str, str]] = []
        links: list[tuple[str, str]] = []
        cache = self._dirs  # read without the lock: entries are replaced whole, never mutated
        lstat, isdir, listing = os.lstat, stat.S_ISDIR, self._list
        first: list[str] = [root]
        later: list[str] = []
        walked = 0
        while first or later:
            if walked >= limit:
                break
            d = first.pop() if first else later.pop()
            if d in skip:
                continue
            try:
                st = lstat(d)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            walked += 1
            info = listing(d, (st.st_ino, st.st_ctime_ns, st.st_mtime_ns), root)
            if named is not None:
                named += [d + "/" + n for n in info.named]
            before = cache.get(d) if d in old else None
            seen_links = before.links if before is not None else frozenset()
            links += [(d + "/" + n, t) for n, t in sorted(info.links - seen_links)]
            if info.dotgit:
                found.append((d + "/.git", "dotgit"))
            subdirs = info.subdirs
            if info.bare:
                found.append((d, "bare"))
                subdirs = tuple(
                    p for p in subdirs if p.rpartition("/")[2] not in ("objects", "refs")
                )
            for sub in subdirs:
                (first if sub in old else later).append(sub)
        tops: set[str] = set()
        prefix = root.rstrip("/") + "/"
        # Only what appeared since: a directory walked before is never moved, whatever is left.
        for d in later:
            if d in skip or d in old or not d.startswith(prefix):
                continue
            top = root.rstrip("/")
            for part in d[len(prefix) :].split("/"):
                top = top + "/" + part
                if top not in old:
                    tops.add(top)
                    break
        left = sorted(t for t in tops if not any(t.startswith(o + "/") for o in tops))
        return found, left, links

    def _find(
        self, root: str, skip: frozenset[str]
    ) -> tuple[list[tuple[str, str]], list[str], bool]:
        mounts = _mount_generation()
        self._read_events()
        last = self._walks.get((root, skip))
        if last is not None and self._unchanged(last, mounts):
            return list(last.found), list(last.named), last.truncated
        found, named, truncated, seen = self._walk(root, skip)
        walk = self._watch(root, found, named, truncated, seen, mounts, root in self._content)
        key = (root, skip)
        if walk is None:
            self._walks.pop(key, None)
        else:
            if len(self._walks) > 64:
                self._walks.clear()
            self._walks[key] = walk
        return found, named, truncated

    def _unchanged(self, last: _Walk, mounts: int | None) -> bool:
        if mounts is None or mounts != last.mounts:
            return False
        if last.seq == self._seq:
            return True
        gen = self._gen
        return all(gen.get(d, -1) == g for d, g in last.dirs.items())

    def _read_events(self) -> None:
        ino = self._ino
        if ino is None:
            return
        try:
            events = ino.read()
        except OSError:
            events = [(-1, inotify.IN_Q_OVERFLOW, "")]
        if events:
            for tell in self.on_events:
                tell()
        for wd, mask, name in events:
            self._seq += 1
            if mask & inotify.IN_Q_OVERFLOW:
                self._forget_all()
                continue
            d = self._dir_of.get(wd)
            if d is None:
                continue
            if mask & inotify.IN_IGNORED:
                del self._dir_of[wd]
                if self._wd_of.get(d) == wd:
                    del self._wd_of[d]
                    self._content_wds.discard(d)
            elif mask & inotify.IN_ATTRIB and name:
                continue  # an entry's attributes: the listing is the same
            self._gen[d] = self._gen.get(d, 0) + 1

    def _forget_all(self) -> None:
        """Events were lost: every directory counts as changed."""
        self._walks.clear()
        for d in self._gen:
            self._gen[d] += 1

    def _watch(
        self,
        root: str,
        found: list[tuple[str, str]],
        named: list[str],
        truncated: bool,
        seen: dict[str, _DirInfo],
        mounts: int | None,
        content: bool = False,
    ) -> _Walk | None:
        """Watch every directory of a walk; the walk as a result to keep, or None when its
        tree cannot be trusted to report its changes (``follows`` says whether it will be, once
        it stops changing between a listing and its watch)."""
        if truncated or mounts is None or len(seen) > MAX_WATCHED_DIRS or self._no_ino:
            self._unfollowed.add(root)
            return None
        if self._ino is None:
            try:
                self._ino = inotify.Inotify()
            except OSError:
                self._no_ino = True
                self._unfollowed.add(root)
                return None
        ino = self._ino
        dirs: dict[str, int] = {}
        # A directory listed while its change time was young may have changed since within the
        # same tick, before its watch: watched, but the walk is not kept (the next one lists it).
        keep = True
        # A directory that changed between its listing and its watch (or went away, or was
        # replaced, or could not be watched): the change made no event. Every other directory
        # of the walk is still watched (one left unwatched would report nothing of what is made
        # in it later), the walk is not kept, and whoever waits on ``events_fd`` is told
        # (``on_events``; ``take_raced`` says why).
        raced = False
        for d, info in seen.items():
            keep = keep and info.settled
            wd = self._wd_of.get(d)
            if wd is not None and content and d not in self._content_wds:
                try:  # watched for names already: writes too from now on
                    ino.add(d, inotify.CONTENT | inotify.IN_MASK_ADD | inotify.IN_DONT_FOLLOW)
                except OSError:
                    raced = True
                    continue
                self._content_wds.add(d)
            if wd is None:
                try:
                    st = os.lstat(d)
                    dev = st.st_dev
                    if dev not in self._local:
                        self._local[dev] = inotify.sees_every_change(d)
                    if not self._local[dev]:
                        self._unfollowed.add(root)
                        return None
                    mask = STRUCTURE | (inotify.CONTENT if content else 0)
                    wd = ino.add(d, mask | inotify.IN_ONLYDIR | inotify.IN_DONT_FOLLOW)
                    if content:
                        self._content_wds.add(d)
                    # Changed between the walk and the watch: the next call walks again.
                    after = os.lstat(d)
                except OSError:  # gone or replaced since its listing (or no watch to be had)
                    raced = True
                    continue
                old = self._dir_of.get(wd)
                if old is not None and old != d:
                    self._wd_of.pop(old, None)  # the same directory under a new name
                self._wd_of[d] = wd
                self._dir_of[wd] = d
                self._gen.setdefault(d, 0)
                if (after.st_ino, after.st_ctime_ns, after.st_mtime_ns) != info.ident:
                    self._gen[d] += 1
                    raced = True
            dirs[d] = self._gen.get(d, 0)
        if raced:
            with self._lock:
                self._raced = True
            for tell in self.on_events:
                tell()
            return None
        if len(self._wd_of) > 4 * MAX_WATCHED_DIRS:
            self._reset()
            return None
        self._unfollowed.discard(root)
        if not keep:
            return None
        return _Walk(tuple(found), truncated, dirs, self._seq, mounts, tuple(named))

    def follows(self, root: str) -> bool:
        """Whether inotify reports the changes of the tree at ``root`` (``events_fd``), so a walk
        of it costs nothing while it does not change: not when its last walk stopped at the limit,
        it has more than ``MAX_WATCHED_DIRS`` directories, it lies on a filesystem changed
        elsewhere, or inotify is not available."""
        return root not in self._unfollowed

    def events_fd(self) -> int | None:
        """The descriptor that becomes readable when a watched directory changes (``find``
        reads the events, and calls ``on_events`` then: a caller waiting on the descriptor is
        not woken by events another call read); None while nothing is watched."""
        ino = self._ino
        return ino.fd if ino is not None and ino.fd >= 0 else None

    def take_raced(self) -> bool:
        """Whether a walk since the last call saw a directory change between its listing and
        its watch (no event will come for that change: walk again)."""
        with self._lock:
            raced, self._raced = self._raced, False
            return raced

    def close(self) -> None:
        """Drop every watch (the host is exiting); later calls walk every time."""
        with self._find_lock:
            self._reset()
            self._no_ino = True

    def _reset(self) -> None:
        """Too many directories watched (trees that are no longer walked): start over."""
        if self._ino is not None:
            self._ino.close()
        self._ino = None
        self._wd_of.clear()
        self._dir_of.clear()
        self._content_wds.clear()
        self._walks.clear()

    def _walk(
        self, root: str, skip: frozenset[str]
    ) -> tuple[list[tuple[str, str]], list[str], bool, dict[str, _DirInfo]]:
        found: list[tuple[str, str]] = []
        named: list[str] = []
        seen: dict[str, _DirInfo] = {}
        gen = self._names[1]
        cache = self._dirs  # read without the lock: entries are replaced whole, never mutated
        lstat, isdir, listing = os.lstat, stat.S_ISDIR, self._list
        stack = [root]
        truncated = False
        listed = False
        # A directory first seen in a tree walked before is new, and so is every link in it.
        baseline = root in self._rooted
        born: list[tuple[str, str]] = []
        while stack:
            if len(seen) >= MAX_SCAN_DIRS:
                truncated = True
                break
            d = stack.pop()
            if d in skip:
                continue
            try:
                st = lstat(d)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            ident = (st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
            info = cache.get(d)
            if info is None or info.ident != ident or info.names_gen != gen or not info.settled:
                old = info
                info = listing(d, ident, root)
                listed = True
                if info.links and (old is not None or baseline):
                    before = old.links if old is not None else frozenset()
                    born += [(d + "/" + n, t) for n, t in sorted(info.links - before)]
            seen[d] = info
            if info.named:
                named += [d + "/" + n for n in info.named]
            if info.dotgit:
                found.append((d + "/.git", "dotgit"))
            if info.bare:
                found.append((d, "bare"))  # the root too: git takes a bare-shaped cwd for a repo
                stack += [
                    p for p in info.subdirs if p.rpartition("/")[2] not in ("objects", "refs")
                ]
            else:
                stack += info.subdirs
        with self._lock:
            self._rooted.add(root)
            for path, text in born:
                self._born_n += 1
                self._born.append((self._born_n, path, text))
        if listed or truncated:
            with self._lock:
                # Keep what this walk saw; forget directories of this tree that are gone (a walk
                # that listed nothing again saw exactly the directories it saw before).
                if not truncated and not skip:
                    prefix = root.rstrip("/") + "/"
                    for path in [p for p in self._dirs if p.startswith(prefix) and p not in seen]:
                        del self._dirs[path]
                self._dirs.update(seen)
        return found, named, truncated, seen

    def _list(self, d: str, ident: tuple[int, int, int], root: str) -> _DirInfo:
        wanted, gen = self._names
        settled = _now() - ident[1] > SETTLED_NS
        names: list[str] = []
        subdirs: list[str] = []
        links: list[tuple[str, str]] = []
        dotgit = False
        _make_listable(d, root)
        try:
            with os.scandir(d) as it:
                for entry in it:
                    names.append(entry.name)
                    if entry.name == ".git":
                        dotgit = True
                        continue  # a git dir's inside is covered by its own members
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(d + "/" + entry.name)
                        elif entry.is_symlink():
                            links.append((entry.name, os.readlink(entry.path)))
        except OSError:
            pass
        return _DirInfo(
            ident,
            dotgit,
            looks_like_git_dir(names),
            tuple(subdirs),
            frozenset(links),
            tuple(sorted(n for n in names if n in wanted)),
            gen,
            settled,
        )


def _now() -> int:
    return time.time_ns()


def _mount_generation() -> int | None:
    from run_bash.sandbox.spare import mounts

    return mounts().generation()


def _make_listable(d: str, root: str) -> None:
    """A directory of ours that a run made unreadable would hide what is in it: give the owner
    read and search permission back. The directory is reached without following a link below
    the tree's ``root`` (a run may be replacing a directory on the way with one), and must be
    the one just looked at."""
    try:
        st = os.lstat(d)
    except OSError:
        return
    if st.st_uid == os.geteuid() and st.st_mode & 0o500 != 0o500:
        with (
            contextlib.suppress(OSError, ValueError),
            nofollow.parent(d, nofollow.Fence([root])) as (up, name),
        ):
            fd = os.open(name, nofollow.DIR, dir_fd=up)
            try:
                now = os.fstat(fd)
                if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    nofollow.chmod_fd(fd, stat.S_IMODE(now.st_mode) | 0o500)
            finally:
                os.close(fd)


def nested_git_dirs(common: str, limit: int | None = MAX_GIT_DIRS) -> list[str]:
    """Linked worktree admin dirs (``worktrees/*``) and submodule git dirs (``modules/**``,
    nested ones too) under a common dir: at most ``limit`` of them, or every one (None: the
    check after a run, which must judge all a run could have made, however many there are;
    the listing costs what the run made)."""
    cap = limit if limit is not None else float("inf")
    out: list[str] = []
    stack = [common]
    while stack and len(out) < cap:
        g = stack.pop()
        base = os.path.join(g, "worktrees")
        if os.path.isdir(base) and not os.path.islink(base):
            with contextlib.suppress(OSError), os.scandir(base) as it:
                out += [e.path for e in it if e.is_dir(follow_symlinks=False)]
        base = os.path.join(g, "modules")
        if os.path.islink(base) or not os.path.isdir(base):
            continue
        for root, dirs, files in os.walk(base):
            if looks_like_git_dir([*dirs, *files]):
                out.append(root)
                stack.append(root)
                dirs[:] = []  # its own modules/ is walked from the stack
            if len(out) >= cap:
                break
    return out if limit is None else out[:limit]
