"""inotify: which directories changed since the last walk of a project.

A Watcher holds one inotify instance per project, with a watch on every directory the last walk
covered (and each ``.git`` directory), added through ``/proc/self/fd/N`` so the watch lands on
the very inode the walk opened. A run's start skips its walk when nothing happened; a run's end
lists again only the directories with events (a new directory is walked whole), unless events
were lost or a watch could not be added: then it walks everything. A changed ``.gitignore``
makes the next start classify the project again. What inotify cannot see is listed in the
package docstring, with how the store stays correct anyway.

An ignored directory beyond the budget is not entered, so no walk would see a change deep in
it (``rm node_modules/pkg/index.js``): every directory of such a tree (up to ``hole_dirs()``) is
watched too, once per tree, and an event there stamps the tree (``hole_times``) so the end of a
run that changed it names it, though undo keeps nothing of it.

Non-blocking throughout: the instance is ``IN_NONBLOCK``; reading it never waits.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time

from run_bash.inotify import (
    IN_ATTRIB,
    IN_CLOSE_WRITE,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_EXCL_UNLINK,
    IN_IGNORED,
    IN_ISDIR,
    IN_MODIFY,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    Inotify,
)

IN_UNMOUNT = 0x2000

MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
    | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK
)  # fmt: skip
STRUCTURE = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
HOLE_DIRS = 20_000  # directories watched in one ignored tree that is not entered, at most
HOLE_SHARE = 16  # and at most this part of the user's inotify watches (max_user_watches)


def hole_dirs() -> int:
    """How many directories of one ignored tree not entered are watched: ``HOLE_DIRS``, or
    less where the system allows few watches (they are shared with every other program)."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", "rb") as f:
            limit = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0
    return min(HOLE_DIRS, limit // HOLE_SHARE)


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Events:
    """What happened since the last walk, as far as inotify can tell."""

    __slots__ = ("moved", "rules", "structural", "touched", "unknown")

    def __init__(self) -> None:
        self.touched: set[str] = set()  # directories (project-relative) with a changed entry
        self.moved: set[str] = set()  # directories created, removed or moved (and what was in them)
        self.structural = False  # a directory was created, removed or moved
        self.rules = False  # a .gitignore was written, created, removed or moved
        self.unknown = False  # events were lost (overflow) or came from an unknown watch

    def __bool__(self) -> bool:
        return bool(self.touched) or self.structural or self.unknown or self.rules

    def merge(self, other: Events) -> None:
        self.touched |= other.touched
        self.moved |= other.moved
        self.structural |= other.structural
        self.rules |= other.rules
        self.unknown |= other.unknown


class Watcher:
    """Change detection for one project between two walks. Use under the project's lock."""

    def __init__(self) -> None:
        self.valid = False  # every covered directory is watched and nothing was lost
        self.gen = -1  # the snapshot generation the watches describe
        self._wds: dict[tuple[int, int], int] = {}
        # wd -> (directory rel, a holder (not listed), the ignored tree not entered it is in)
        self._by_wd: dict[int, tuple[str, bool, str | None]] = {}
        self._holes: set[tuple[str, int, int]] = set()  # trees watched whole: (rel, dev, ino)
        self.hole_times: dict[str, int] = {}  # ignored tree not entered -> when it last changed
        self._failed = False
        self._carry: Events | None = None  # events given back by a walk that was stopped
        self._ino: Inotify | None = None
        with contextlib.suppress(OSError):
            self._ino = Inotify()

    @property
    def usable(self) -> bool:
        return self._ino is not None

    def add(
        self, dir_fd: int, rel: str, holder: bool = False, hole: str | None = None
    ) -> os.stat_result | None:
        """Watch the directory open at ``dir_fd`` (once per inode); ``rel`` is where it is now.
        ``holder``: a directory whose entries are not listed (a ``.git``, an ignored directory
        not entered): its events mark ``rel``, the directory holding it, whose listing shows
        its own stat. ``hole``: the ignored tree not entered that the directory is in (a watch
        that cannot be added there is only a change that goes unnamed)."""
        if self._ino is None:
            return None
        try:
            st = os.fstat(dir_fd)
        except OSError:
            self._failed |= hole is None
            return None
        key = (st.st_dev, st.st_ino)
        wd = self._wds.get(key)
        if wd is None:
            try:
                wd = self._ino.add(f"/proc/self/fd/{dir_fd}", MASK)
            except OSError:
                # ENOSPC (max_user_watches) or no /proc: walk every time
                self._failed |= hole is None
                return None
            self._wds[key] = wd
        self._by_wd[wd] = (rel, holder, hole)
        return st

    def add_hole(self, dir_fd: int, rel: str, hole: str) -> None:
        """Watch the ignored tree ``hole`` (not entered) open at ``dir_fd``, in ``rel``: its top
        as a holder of ``rel``, and once per tree every directory in it, up to ``HOLE_DIRS``."""
        st = self.add(dir_fd, rel, True, hole)
        if st is None or (hole, st.st_dev, st.st_ino) in self._holes:
            return
        self._holes.add((hole, st.st_dev, st.st_ino))
        stack, n, cap = [os.dup(dir_fd)], 0, hole_dirs()
        try:
            while stack:
                fd = stack.pop()
                try:
                    with os.scandir(fd) as it:
                        names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
                    for name in names:
                        n += 1
                        if n > cap:
                            return
                        with contextlib.suppress(OSError):
                            sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                            got = self.add(sub, rel, True, hole)
                            if got is not None and stat.S_ISDIR(got.st_mode):
                                stack.append(sub)
                            else:
                                os.close(sub)
                except OSError:
                    pass
                finally:
                    os.close(fd)
        finally:
            for fd in stack:
                os.close(fd)

    def begin_walk(self, into: Events | None = None) -> tuple[bool, int, bool, Events]:
        """Drop pending events (the walk about to start sees what they announced; ``into``
        gets them). Until ``end_walk``, the watcher vouches for nothing (a walk that fails
        leaves it so). Returns what ``abort_walk`` needs to undo this."""
        ev = self.take()
        if into is not None:
            into.merge(ev)
            ev = into
        saved = (self.valid, self.gen, self._failed, ev)
        self._failed = False
        self.valid = False
        self.gen = -1
        return saved

    def abort_walk(self, saved: tuple[bool, int, bool, Events]) -> None:
        """A walk stopped before its end: the watcher vouches again for what it did before, and
        the events that walk took are read again by the next ``take``."""
        self.valid, self.gen, failed, ev = saved
        self._failed |= failed
        if self._carry is None:
            self._carry = Events()
        self._carry.merge(ev)

    def end_walk(self, gen: int) -> None:
        """The walk that just ended is the state the watches now guard."""
        self.valid = self._ino is not None and not self._failed
        self.gen = gen

    def changed(self) -> bool:
        """Whether anything happened since the last walk (reads every pending event)."""
        return bool(self.take()) or not self.valid

    def take(self) -> Events:
        """Read every pending event."""
        ev = Events()
        if self._carry is not None:
            ev, self._carry = self._carry, None
        if self._ino is None:
            ev.unknown = True
            return ev
        try:
            events = self._ino.read()
        except OSError:
            self.valid = False
            ev.unknown = True
            return ev
        for wd, mask, name in events:
            if mask & (IN_Q_OVERFLOW | IN_UNMOUNT):
                self.valid = False
                ev.unknown = True
                continue
            where = self._by_wd.get(wd)
            if mask & IN_IGNORED:
                self._by_wd.pop(wd, None)
                for key, w in list(self._wds.items()):
                    if w == wd:
                        del self._wds[key]
                ev.structural = True
                continue
            if where is None:
                ev.unknown = True
                continue
            rel, holder, hole = where
            ev.touched.add(rel)
            if hole is not None:
                self.hole_times[hole] = time.time_ns()
                if mask & IN_ISDIR and mask & (IN_CREATE | IN_MOVED_TO):
                    # A directory new in it: watched when the tree is next met.
                    self._holes = {h for h in self._holes if h[0] != hole}
            if holder:
                continue  # an entry of a directory not listed: listing ``rel`` re-stats it
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF) or (mask & IN_ISDIR and mask & STRUCTURE):
                ev.structural = True
            if name:
                if name == ".gitignore":
                    ev.rules = True
                if mask & IN_ISDIR:
                    sub = f"{rel}/{name}" if rel else name
                    ev.touched.add(sub)
                    if mask & STRUCTURE:
                        ev.moved.add(sub)
        return ev

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
            self._ino = None
        self.valid = False
