"""The change store: snapshots per project, one change set per run, undo, retention.

Layout under the store root (0700; the host's state dir, outside every sandbox's grants)::

    objects/packs/*.pack         blobs by SHA-256, one pack per walk that found new content
    tmp/                         temp files, renamed into place
    gc.lock                      shared by every begin/finish/undo, exclusive for a collection
    projects/<key>/              key = first 16 hex of sha256(project path)
        path                     the project's path
        lock                     flock: one walk at a time per project, across hosts
        state.json               snapshot generation, active runs, recently ended runs
        snap                     the latest snapshot written (marshal; the stat cache of the
                                 first walk of the next host)
        snap-<gen>               older snapshots that runs still active began from
        runs/<seq>-<run>.json    change sets of runs that changed something

``state.json`` and ``snap`` are rewritten in place under the project lock (creating a file costs
0.65 ms on the file system measured here; rewriting one, 3 us); each carries a check so a write
torn by a crash reads as absent: the state restarts empty and the next walk reads every file.

The index: the latest snapshot of each project is kept in memory with an inotify watcher
(watch.py) that says which directories changed since. A run's start and end list again only those
directories (a new directory is walked whole); a start with no event reads nothing. The whole
project is walked only when the watcher cannot vouch: the first run of a host, an event queue
overflow, an ignore file changed by a run, a file system inotify does not see whole
(``project.trusted_fs``). Writing the snapshot to disk, checking a quick end with a full walk
(what inotify cannot see), and collecting the store happen on the store's own thread when the
project has been quiet for ``CHECK_DELAY_S``; a run that starts meanwhile makes that walk stop at
the next directory and never waits for it.

Threading: every public method may be called from any worker thread, concurrently; none may run
on the RPC loop (they walk the project and read files the command controls). Per project, walks
are serialized by a thread lock plus ``flock``, so two hosts sharing the store also agree.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import marshal
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from run_bash.statedir import human_size
from run_bash.statedir import write_atomic as _write_atomic

from .objects import Objects, digest
from .project import find_project, home_of, scope_of, trusted_fs
from .records import Records
from .render import Change, ChangeSet, entry_from_json, entry_to_json
from .snapshot import (
    DIR_FLAGS,
    Entry,
    Snapshot,
    TooManyFiles,
    diff,
    holes_changed,
    linked_moved,
    merge,
    same_state,
)
from .walk import RuleBook, WalkLimits, ignored_above, read_exclude, scan
from .watch import Events, Watcher

MIB = 1024 * 1024
FORMAT = 1
HARD_FILES_FACTOR = 4  # a run may leave this many times max_files entries before the walk stops
RECENT_KEEP_S = 24 * 3600  # the longest an ended run is kept for overlaps (``_live``)
PROJECT_IDLE_S = 30 * 24 * 3600  # a project unused this long is dropped whole
WATCHED_PROJECTS = 8  # inotify instances kept (the default per-user limit is 128)
GC_EVERY_PRUNES = 16  # collect garbage after this many pruned change sets (or when over max_store)
SNAP_MAGIC = b"run_bash-snapshot-3\n"
SNAP_HEAD = struct.Struct("<QQI")  # generation, payload length, crc32
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"

log = logging.getLogger("run_bash")


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


@dataclass(frozen=True)
class Limits:
    """What the store covers and keeps."""

    max_file_size: int = 10 * MIB  # larger files are listed as changed, not kept
    max_files: int = 100_000  # a project with more files is not recorded
    keep: int = 50  # change sets kept per project (runs that changed nothing are not kept)
    max_store: int = 1024 * MIB  # total bytes of the store; the oldest change sets go first
    ignored_file_max: int = MIB  # larger ignored files are listed, not kept
    ignored_total: int = 64 * MIB  # bytes of ignored content kept per project

    def walk(self) -> WalkLimits:
        return WalkLimits(
            max_files=self.max_files,
            max_file_size=self.max_file_size,
            ignored_file_max=self.ignored_file_max,
            ignored_total=self.ignored_total,
        )


@dataclass(frozen=True)
class NotRecorded:
    """``begin`` could not record this run; ``str()`` is the line to show. ``lasting``: the
    project itself is the reason (too many files, too large), so the next run there will most
    likely get the same answer, after the same walk."""

    reason: str
    lasting: bool = False
    # Nothing here to record (no project, or none the sandbox can write): the run says so in its
    # ``changes``, the agent's result carries no note about it.
    quiet: bool = False

    def __str__(self) -> str:
        return f"changes not recorded: {self.reason}"


@dataclass
class Token:
    """A run in progress, from ``begin`` to ``finish``. Opaque to callers."""

    run_id: str
    project: str
    key: str
    before: Snapshot
    gen: int
    began_ns: int
    undo_of: str | None = None
    label: str | None = None
    done: bool = False
    unasked: bool = False  # the gate let it through because undo covers it (``prune_runs``)
    # A file's kernel stamp when the run began (``file_clock``): one born after it is the run's.
    born_ns: int = 0


def file_clock(where: str) -> int:
    """The time the kernel stamps on a file made now: the times of a new nameless file
    (``O_TMPFILE``) in the directory ``where``. Every file made before this call has a stamp at
    or before it, every file made after at or after it. A clock reading is not that: since
    Linux 6.13 a file's stamp may be finer than ``CLOCK_REALTIME_COARSE`` and ahead of it
    (multigrain timestamps), so a file made just before a coarse reading can look newer.
    Without ``O_TMPFILE``, or when the stamp is a whole second (a file system that keeps only
    seconds, where it may be behind a finer stamp of a file elsewhere), the fine clock: ahead of
    every stamp made before, so undo keeps what it cannot tell apart."""
    try:
        fd = os.open(where, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    except OSError:
        return time.time_ns()
    try:
        stamp = os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
    return stamp if stamp % 1_000_000_000 else time.time_ns()


@dataclass
class _Pending:
    """A run that ended with a quick walk: the full walk that checks it is still to come."""

    project: str
    change_set: ChangeSet  # a private copy, amended if the check finds what inotify missed
    before: Snapshot
    after: Snapshot
    began_ns: int = 0


class _Plan(TypedDict):
    """What undo would do: each change with the path's current state, or why it is left."""

    restore: list[tuple[Change, Entry, Entry | None]]  # (change, its earlier state, current)
    remove: list[tuple[Change, Entry | None]]
    conflicts: list[tuple[Change, str]]
    lost: list[tuple[Change, str]]


class _Stop(Exception):
    """A check's walk gives way to a run that wants the project (checks.py)."""


@dataclass
class _Project:
    """What the store holds in memory for one project."""

    snapshot: Snapshot | None = None  # the latest state (memory; written to disk when quiet)
    disk: Snapshot | None = None  # what the ``snap`` file of generation ``gen`` holds
    gen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: _Pending | None = None
    version: int = 0  # bumped whenever ``snapshot`` changes (the watcher vouches for one)
    waiting: int = 0  # runs waiting for the lock: a check's walk stops for them
    trusted: bool | None = None  # inotify sees every change on its file system


def _proc_start(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (tells a reused pid apart), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return None


def _write_inplace(path: str, data: bytes) -> None:
    """Rewrite ``path`` with ``data`` without creating a new file (callers hold the lock that
    serializes writers and readers of ``path``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        view, off = memoryview(data), 0
        while off < len(data):
            off += os.pwrite(fd, view[off:], off)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _read_snapshot(path: str) -> tuple[int, Snapshot] | None:
    """(generation, snapshot) from a snapshot file, or None when absent, torn or foreign."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        head = len(SNAP_MAGIC) + SNAP_HEAD.size
        if not data.startswith(SNAP_MAGIC) or len(data) < head:
            return None
        gen, n, crc = SNAP_HEAD.unpack(data[len(SNAP_MAGIC) : head])
        payload = data[head : head + n]
        if len(payload) != n or zlib.crc32(payload) != crc:
            return None
        return gen, Snapshot.from_data(marshal.loads(payload))
    except (OSError, ValueError, EOFError, TypeError, KeyError):
        return None


class ChangeStore(Records):
    """Snapshots, change sets and undo for every project, in one directory.

    Args:
        root: the store directory (created 0700 if missing).
        limits: what is covered and kept.
        home: the user's home directory, never a project (default ``$HOME``).
        quick_finish: end a run by listing again only the directories inotify saw change, and
            check it with a full walk when the project is quiet, off the caller's thread
            (False: every run ends with a full walk).
    """

    def __init__(
        self,
        root: str,
        limits: Limits | None = None,
        home: str | None = None,
        quick_finish: bool = True,
    ) -> None:
        self.root = os.path.abspath(root)
        self.limits = limits or Limits()
        self.home = home_of(home)
        self._mu = threading.Lock()
        self._projects: dict[str, _Project] = {}
        self._watchers: dict[str, Watcher] = {}  # insertion order = least recently used first
        self._released = False  # ``release``: no inotify instance is held from then on
        self.walks = 0  # full walks done (the figures and tests read it)
        self.quick_walks = 0  # starts and ends that listed only the directories with events
        self.amended = 0  # change sets completed by the check after a quick end
        self.stopped = 0  # checks that gave way to a run
        self.quick_finish = quick_finish
        self._to_check: dict[str, tuple[str, float]] = {}  # key -> (project, when due)
        self._checking = 0  # checks the store's thread is running now
        self._checker: threading.Thread | None = None
        self._wake = threading.Condition(self._mu)
        self._active: dict[str, Token] = {}
        self._pruned = 0
        self._written = 0
        self._size_at_gc: int | None = None
        self._ready = False
        self._me = f"{os.getpid()}:{_proc_start(os.getpid())}"

    # -- layout ----------------------------------------------------------------------------------

    def _init(self) -> None:
        if self._ready:
            return
        with self._mu:  # one Objects for every thread
            if self._ready:
                return
            for sub in ("", "objects", "tmp", "projects"):
                os.makedirs(os.path.join(self.root, sub), mode=0o700, exist_ok=True)
            os.chmod(self.root, 0o700)
            self.objects = Objects(os.path.join(self.root, "objects"))
            st = os.stat(self.root)
            self._store_id = (st.st_dev, st.st_ino)
            self._ready = True

    def _pdir(self, key: str) -> str:
        return os.path.join(self.root, "projects", key)

    @staticmethod
    def _key(project: str) -> str:
        return digest(os.fsencode(project))[:16]

    @contextlib.contextmanager
    def _gc_lock(self, exclusive: bool = False) -> Iterator[None]:
        fd = os.open(
            os.path.join(self.root, "gc.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self, key: str, project: str, check: bool = False) -> Iterator[_Project]:
        """The project, locked. A run (``check`` False) that has to wait makes a check's walk
        stop for it (``_Project.waiting``)."""
        with self._mu:
            proj = self._projects.setdefault(key, _Project())
            if not check:
                proj.waiting += 1
        counted = not check
        try:
            with self._gc_lock(), proj.lock:
                if counted:
                    with self._mu:
                        proj.waiting -= 1
                    counted = False
                pdir = self._pdir(key)
                if not os.path.isdir(pdir):
                    os.makedirs(os.path.join(pdir, "runs"), mode=0o700, exist_ok=True)
                    _write_atomic(os.path.join(pdir, "path"), os.fsencode(project), self._tmp)
                fd = os.open(
                    os.path.join(pdir, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    yield proj
                finally:
                    os.close(fd)
        finally:
            if counted:
                with self._mu:
                    proj.waiting -= 1

    @property
    def _tmp(self) -> str:
        return os.path.join(self.root, "tmp")

    # -- project state ---------------------------------------------------------------------------

    def _read_state(self, key: str) -> dict[str, Any]:
        try:
            with open(os.path.join(self._pdir(key), "state.json"), "rb") as f:
                state = json.load(f)
            if isinstance(state, dict) and state.get("format") == FORMAT:
                return state
        except (OSError, ValueError):
            pass
        return {"format": FORMAT, "gen": 0, "seq": 0, "active": {}, "recent": [], "used": 0}

    def _write_state(self, key: str, state: dict[str, Any]) -> None:
        state["used"] = time.time()
        data = json.dumps(state, separators=(",", ":")).encode()
        _write_inplace(os.path.join(self._pdir(key), "state.json"), data)

    def _live(self, state: dict[str, Any]) -> None:
        """Drop active runs whose host is gone, and ended runs that can overlap no run (one that
        ended before every run going now began): the state every run reads and writes stays
        small however long the history of commands run one after another."""
        now = time.time_ns()
        cutoff = now - RECENT_KEEP_S * 1_000_000_000
        alive = {}
        for rid, info in state["active"].items():
            pid_s, _, start = str(info.get("host", "")).partition(":")
            if pid_s.isdigit() and _proc_start(int(pid_s)) == (start or None):
                alive[rid] = info
        state["active"] = alive
        began = [info.get("began") for info in alive.values()]
        if all(type(b) is int for b in began):  # (a run without it keeps every one)
            cutoff = max(cutoff, min(began, default=now))
        state["recent"] = [r for r in state["recent"] if r[2] >= cutoff][-200:]

    def _load_snapshot(self, key: str, proj: _Project, state: dict[str, Any]) -> Snapshot | None:
        gen = state["gen"]
        if proj.snapshot is not None and proj.gen == gen:
            return proj.snapshot
        got = _read_snapshot(os.path.join(self._pdir(key), "snap"))
        # A lost or torn cache only costs a full read of the project.
        snap = got[1] if got is not None and got[0] == gen else None
        self._set(proj, snap)
        proj.disk, proj.gen = snap, gen
        return snap

    @staticmethod
    def _set(proj: _Project, snap: Snapshot | None) -> None:
        if snap is not proj.snapshot:
            proj.snapshot = snap
            proj.version += 1

    def _save_snapshot(self, key: str, proj: _Project, state: dict[str, Any]) -> None:
        """Write the project's latest snapshot to disk. The one it replaces is kept as
        ``snap-<gen>`` while an active run began from it (a collection must keep its blobs)."""
        snap = proj.snapshot
        if snap is None or snap is proj.disk:
            return
        if proj.disk is not None and proj.gen == state["gen"] and snap.dirs == proj.disk.dirs:
            proj.disk = snap
            return
        pdir = self._pdir(key)
        old = state["gen"]
        gen = old + 1
        cur = os.path.join(pdir, "snap")
        if old in {int(a["gen"]) for a in state["active"].values()}:
            with contextlib.suppress(FileNotFoundError):
                os.rename(cur, os.path.join(pdir, f"snap-{old}"))
        payload = marshal.dumps(snap.to_data())
        head = SNAP_MAGIC + SNAP_HEAD.pack(gen, len(payload), zlib.crc32(payload))
        _write_inplace(cur, head + payload)
        state["gen"] = gen
        proj.disk, proj.gen = snap, gen
        self._drop_old_snapshots(key, state)

    def _drop_old_snapshots(self, key: str, state: dict[str, Any]) -> None:
        keep = {int(a["gen"]) for a in state["active"].values()}
        pdir = self._pdir(key)
        for name in os.listdir(pdir):
            if name.startswith("snap-") and name[5:].isdigit() and int(name[5:]) not in keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(pdir, name))

    def _watcher(self, key: str) -> Watcher:
        with self._mu:
            if self._released:  # the host is exiting: a late check walks, and holds nothing
                spent = Watcher()
                spent.close()
                return spent
            w = self._watchers.pop(key, None)
            if w is None:
                w = Watcher()
                while len(self._watchers) >= WATCHED_PROJECTS:
                    self._watchers.pop(next(iter(self._watchers))).close()
            self._watchers[key] = w
            return w

    def close(self) -> None:
        """Finish pending checks, write the snapshots and release the inotify instances (the
        host's shutdown). The store stays usable."""
        self.settle()
        with self._mu:
            keys = [(k, p) for k, p in self._projects.items() if p.snapshot is not p.disk]
        for key, proj in keys:
            with contextlib.suppress(OSError), self._locked(key, "", check=True):
                state = self._read_state(key)
                self._save_snapshot(key, proj, state)
                self._write_state(key, state)
        self.release()

    def release(self) -> None:
        """Release the inotify instances now (the host is exiting; nothing is saved): a project
        looked at later is walked again."""
        with self._mu:
            self._released = True
            for w in self._watchers.values():
                w.close()
            self._watchers.clear()

    def _scan(
        self,
        project: str,
        prev: Snapshot | None,
        watcher: Watcher,
        *,
        book: RuleBook | None = None,
        roots: tuple[str, ...] = ("",),
        finishing: bool = False,
        began_ns: int = 0,
        known_only: bool = False,
        only: list[str] | None = None,
        events: Events | None = None,
        stop: _Project | None = None,
    ) -> Snapshot:
        lim = self.limits
        if only is None:
            self.walks += 1
            saved = watcher.begin_walk(events)
        else:
            self.quick_walks += 1
        try:
            fd = os.open(project, DIR_FLAGS)
        except FileNotFoundError:
            if not finishing:
                raise
            return Snapshot({}, taken_ns=time.time_ns(), scope=roots)  # the project is gone
        add = watcher.add if watcher.usable else None

        def on_dir(dfd: int, rel: str, holder: bool, hole: str | None = None) -> None:
            if stop is not None and stop.waiting:
                raise _Stop
            if add is not None:
                add(dfd, rel, holder) if hole is None else watcher.add_hole(dfd, rel, hole)

        try:
            kw: dict[str, Any] = {}
            if known_only:
                kw.update(limits=WalkLimits(1 << 62, *lim.walk().key), known_only=True)
            else:
                kw["limits"] = lim.walk()
            if finishing and only is None and not known_only:
                kw["hard_files"] = HARD_FILES_FACTOR * lim.max_files
            with self.objects.writer() as w:
                snap = scan(
                    fd,
                    prev,
                    w,
                    rules=book,
                    finishing=finishing,
                    began_ns=began_ns,
                    skip=self._store_id,
                    on_dir=on_dir if (add is not None or stop is not None) else None,
                    only=only,
                    roots=roots,
                    **kw,
                )
        except _Stop:
            if only is None:
                watcher.abort_walk(saved)  # as if this walk never started
            raise
        finally:
            os.close(fd)
        self._written += snap.blob_bytes_added
        return snap

    # -- public API ------------------------------------------------------------------------------

    def project_for(self, cwd: str) -> tuple[str | None, str | None]:
        """The project of a run started in ``cwd``: (path, None), or (None, why not). See
        project.py: the git top level, else the nearest directory with a project file."""
        return find_project(cwd, self.home)

    def begin(
        self,
        run_id: str,
        cwd: str,
        *,
        undo_of: str | None = None,
        label: str | None = None,
        writable: Sequence[str] | None = None,
    ) -> Token | NotRecorded:
        """Record the project's state before a run starts (the command must not start before this
        returns). ``label`` (the command) is kept with the change set. ``writable``: the paths the
        run's sandbox may write (None: the run has no sandbox); only their part of the project is
        walked. Returns a Token for ``finish``, or NotRecorded with the reason."""
        project, why = self.project_for(cwd)
        if project is None:
            return NotRecorded(why or "no project", quiet=True)
        roots, why = scope_of(project, writable)
        if roots is None:
            return NotRecorded(why or "nothing to record", quiet=True)
        inside = self._ignored_scope(project, roots)
        if inside is not None:
            return NotRecorded(f"{inside} is ignored (.gitignore): nothing to keep", quiet=True)
        return self._begin(run_id, project, undo_of, label, roots)

    @staticmethod
    def _ignored_scope(project: str, roots: tuple[str, ...]) -> str | None:
        """An ignored directory a scope root lies in (a run in ``node_modules/x``), or None."""
        if roots == ("",):
            return None
        try:
            fd = os.open(project, DIR_FLAGS)
        except OSError:
            return None
        try:
            for r in roots:
                with contextlib.suppress(OSError):
                    got = ignored_above(fd, r)
                    if got is not None:
                        return os.path.join(project, got)
        finally:
            os.close(fd)
        return None

    def _begin(
        self,
        run_id: str,
        project: str,
        undo_of: str | None,
        label: str | None = None,
        roots: tuple[str, ...] = ("",),
    ) -> Token | NotRecorded:
        got = self._start(project, roots, run_id)
        if isinstance(got, NotRecorded):
            return got
        key, snap, gen, now, born = got
        token = Token(run_id, project, key, snap, gen, now, undo_of, label, born_ns=born)
        with self._mu:
            self._active[run_id] = token
        self._schedule(key, project)  # write the snapshot when quiet
        return token

    def peek(self, project: str, roots: tuple[str, ...] = ("",)) -> Snapshot | NotRecorded:
        """The project now, as a run's start there would record it (its content kept in the
        store), without starting a run; or NotRecorded with why a start would not be recorded.
        What an undo's plan checks the paths it would replace against (``undoing.plan``)."""
        got = self._start(project, roots, None)
        if isinstance(got, NotRecorded):
            return got
        self._schedule(got[0], project)  # write the snapshot when quiet
        return got[1]

    def _start(
        self, project: str, roots: tuple[str, ...], run_id: str | None
    ) -> tuple[str, Snapshot, int, int, int] | NotRecorded:
        """Walk the project as a run starts: (key, snapshot, generation, clock, file stamp), or
        NotRecorded. With ``run_id``, the run is marked active."""
        try:
            self._init()
        except OSError as err:
            return NotRecorded(f"the undo store {self.root} is unusable ({err.strerror})")
        key = self._key(project)
        try:
            with self._locked(key, project) as proj:
                state = self._read_state(key)
                self._live(state)
                if run_id is not None:
                    proj.pending = None  # its check is not due any more: a run starts now
                prev = self._load_snapshot(key, proj, state)
                watcher = self._watcher(key)
                snap = self._now(project, proj, prev, watcher, roots)
                if snap.bytes > self.limits.max_store:
                    return NotRecorded(
                        f"the project's files take {human_size(snap.bytes)}, more than the store's "
                        f"{human_size(self.limits.max_store)} (undo.max_store)",
                        lasting=True,
                    )
                self._set(proj, snap)
                watcher.end_walk(proj.version)
                now, born = time.time_ns(), file_clock(self.root)
                if run_id is not None:
                    state["active"][run_id] = {"host": self._me, "gen": state["gen"], "began": now}
                    self._write_state(key, state)
        except TooManyFiles as err:
            return NotRecorded(
                f"the project has {err} (undo.max_files = {self.limits.max_files:,})",
                lasting=True,
            )
        except OSError as err:
            return NotRecorded(f"cannot read the project {project} ({err.strerror or err})")
        return key, snap, state["gen"], now, born

    def _trusted(self, project: str, proj: _Project) -> bool:
        if proj.trusted is None:
            try:
                fd = os.open(project, DIR_FLAGS)
            except OSError:
                return False
            try:
                proj.trusted = trusted_fs(fd)
            finally:
                os.close(fd)
        return proj.trusted

    def _vouched(
        self, project: str, proj: _Project, prev: Snapshot | None, watcher: Watcher
    ) -> bool:
        """Whether ``prev`` plus the watcher's events are the project now."""
        return (
            prev is not None
            and prev is proj.snapshot
            and watcher.valid
            and watcher.gen == proj.version
            and self._trusted(project, proj)
        )

    def _now(
        self,
        project: str,
        proj: _Project,
        prev: Snapshot | None,
        watcher: Watcher,
        roots: tuple[str, ...],
    ) -> Snapshot:
        """The project as a run is about to start (classified with the ignore rules on disk)."""
        if self._vouched(project, proj, prev, watcher):
            assert prev is not None
            ev = watcher.take()
            same_rules = (
                prev.scope == roots
                and not prev.rules_stale
                and not ev.rules
                and self._exclude(project) == prev.exclude.get("")
            )
            if same_rules and not ev.unknown:
                moved = linked_moved(project, prev)
                if not ev and not moved:
                    return prev
                with contextlib.suppress(OSError):
                    part = self._scan(
                        project, prev, watcher, only=sorted((ev.touched | moved) & prev.dirs.keys())
                    )
                    snap = self._relink(project, prev, merge(prev, part), part, watcher)
                    if snap.files <= self.limits.max_files:
                        return snap
        base = prev if prev is not None and prev.scope == roots else None
        return self._scan(project, base, watcher, roots=roots)

    @staticmethod
    def _exclude(project: str) -> bytes | None:
        try:
            fd = os.open(project, DIR_FLAGS)
        except OSError:
            return None
        try:
            return read_exclude(fd) or None
        finally:
            os.close(fd)

    def finish(self, token: Token) -> ChangeSet:
        """Record what the run changed since ``begin``. Call it once the run is over (exit,
        timeout, kill, host shutdown). Returns the change set (kept only when not empty)."""
        if token.done:
            raise ValueError(f"run {token.run_id} is already finished")
        token.done = True
        with self._mu:
            self._active.pop(token.run_id, None)
        key, project = token.key, token.project
        note = None
        with self._locked(key, project) as proj:
            state = self._read_state(key)
            self._live(state)
            prev = self._load_snapshot(key, proj, state)
            if prev is not None and prev.scope != token.before.scope:
                prev = None
            watcher = self._watcher(key)
            book = RuleBook(frozen=token.before)
            after, rules_changed = self._quick_after(project, proj, prev, watcher, token)
            quick = after is not None
            complete = True
            if after is None:
                base = prev or token.before
                try:
                    try:
                        after = self._scan(
                            project,
                            base,
                            watcher,
                            book=book,
                            roots=token.before.scope,
                            finishing=True,
                            began_ns=token.born_ns,
                        )
                    except TooManyFiles as err:
                        # Still account for everything that was there before; new paths are
                        # listed where they start, neither entered nor read.
                        complete = False
                        note = f"the run left {err} in the project: new paths are not tracked"
                        after = self._scan(
                            project,
                            token.before,
                            watcher,
                            book=RuleBook(frozen=token.before),
                            roots=token.before.scope,
                            finishing=True,
                            began_ns=token.born_ns,
                            known_only=True,
                        )
                    rules_changed = after.rules_stale
                except OSError as err:
                    after, complete = None, False
                    note = f"cannot read the project {project} ({err.strerror or err})"
            ended = time.time_ns()
            state["active"].pop(token.run_id, None)
            overlaps = sorted(
                {rid for rid in state["active"] if rid != token.run_id}
                | {r[0] for r in state["recent"] if r[0] != token.run_id and r[2] > token.began_ns}
            )
            state["recent"].append([token.run_id, token.began_ns, ended])
            changes = diff(token.before, after) if after is not None else []
            if after is not None:
                changes = holes_changed(
                    changes, token.before, after, watcher.hole_times, token.began_ns
                )
            cs = ChangeSet(
                run_id=token.run_id,
                project=project,
                began=token.began_ns / 1e9,
                ended=ended / 1e9,
                changes=[Change(p, b, a) for p, b, a in changes],
                overlaps=overlaps,
                undo_of=token.undo_of,
                label=token.label,
                note=note,
                max_file_size=self.limits.max_file_size,
                scope=token.before.scope,
                unasked=token.unasked,
            )
            if after is not None:
                if rules_changed:
                    after.rules_stale = True
                self._set(proj, after)
                if complete:  # a partial walk must not let the next start skip its walk
                    watcher.end_walk(proj.version)
            else:
                self._set(proj, None)
            self._drop_old_snapshots(key, state)
            if cs.changes:
                runs = os.path.join(self._pdir(key), "runs")
                last = max((int(n[:8]) for n in os.listdir(runs) if n[:8].isdigit()), default=0)
                state["seq"] = max(state["seq"], last) + 1
                cs.seq = state["seq"]
                rec = json.dumps(cs.to_json(), separators=(",", ":")).encode()
                path = os.path.join(self._pdir(key), "runs", f"{cs.seq:08d}-{token.run_id}.json")
                _write_inplace(path, rec)  # a torn record reads as absent
                self._written += len(rec)
                self._pruned += self._prune_runs(key, self.limits.keep)
            if quick and after is not None:
                copy = ChangeSet.from_json(cs.to_json())
                proj.pending = _Pending(project, copy, token.before, after, token.born_ns)
            self._write_state(key, state)
        self._schedule(key, project)
        return cs

    def _quick_after(
        self,
        project: str,
        proj: _Project,
        prev: Snapshot | None,
        watcher: Watcher,
        token: Token,
    ) -> tuple[Snapshot | None, bool]:
        """The project now, listing again only the directories inotify saw change: (snapshot,
        an ignore file changed), or (None, …) when a full walk is needed."""
        if not self.quick_finish or not self._vouched(project, proj, prev, watcher):
            return None, False
        assert prev is not None
        ev = watcher.take()
        if ev.unknown:
            return None, False
        moved = linked_moved(project, prev)
        if not ev and not moved:
            return prev, False  # nothing happened: nothing to list
        try:
            part = self._scan(
                project,
                prev,
                watcher,
                book=RuleBook(frozen=token.before),
                finishing=True,
                began_ns=token.born_ns,
                only=sorted((ev.touched | moved) & prev.dirs.keys()),
            )
            after = self._relink(project, prev, merge(prev, part), part, watcher, token=token)
        except OSError:
            return None, False
        if after.files > self.limits.max_files:
            return None, False
        return after, ev.rules

    def _relink(
        self,
        project: str,
        prev: Snapshot,
        snap: Snapshot,
        part: Snapshot,
        watcher: Watcher,
        token: Token | None = None,
    ) -> Snapshot:
        """``snap`` with the directories of every other name of a hard-linked file that changed
        listed again too: a write through one name changes them all, and inotify reported only
        the directory of the name written through."""
        if not prev.links and not part.links:
            return snap
        changed = set()
        for path, ino in part.links.items() | {(p, i) for p, i in prev.links.items()
                                              if p.rpartition("/")[0] in part.dirs}:  # fmt: skip
            if not same_state(prev.entry(path), snap.entry(path)):
                changed.add(ino)
        if not changed:
            return snap
        dirs = {
            p.rpartition("/")[0]
            for p, i in prev.links.items()
            if i in changed and p.rpartition("/")[0] not in part.dirs
        }
        dirs &= snap.dirs.keys()
        if not dirs:
            return snap
        book = RuleBook(frozen=token.before) if token is not None else None
        more = self._scan(
            project,
            snap,
            watcher,
            book=book,
            finishing=token is not None,
            began_ns=token.born_ns if token is not None else 0,
            only=sorted(dirs),
        )
        return merge(snap, more)

    def _schedule(self, key: str, project: str) -> None:
        """Check, write and collect once the project is quiet (checks.py)."""
        from .checks import schedule

        schedule(self, key, project)

    def settle(self) -> None:
        """Run now the checks still due after quick run ends (``get``, ``undo`` and ``close``
        call it, so what they read is complete)."""
        from .checks import settle

        settle(self)

    def abandon(self, token: Token) -> None:
        """Forget a begun run that will never start (its command could not be spawned)."""
        token.done = True
        with self._mu:
            self._active.pop(token.run_id, None)
        with self._locked(token.key, token.project) as proj:
            state = self._read_state(token.key)
            state["active"].pop(token.run_id, None)
            self._load_snapshot(token.key, proj, state)
            self._drop_old_snapshots(token.key, state)
            self._write_state(token.key, state)

    # -- undo (undoing.py) ----------------------------------------------------------------------

    def plan(self, run_id: str, force: bool = False) -> dict[str, Any]:
        """What ``undo`` would do now, without doing it (``undoing.plan``). Raises KeyError when
        no change set is kept for ``run_id``."""
        from .undoing import plan

        return plan(self, run_id, force)

    def undo(
        self, run_id: str, force: bool = False, new_run_id: str | None = None
    ) -> dict[str, Any]:
        """Take back what ``run_id`` changed, path by path (``undoing.undo``). Raises KeyError
        when no change set is kept for ``run_id``."""
        from .undoing import undo

        return undo(self, run_id, force, new_run_id)

    # -- retention -------------------------------------------------------------------------------

    def _prune_runs(self, key: str, keep: int) -> int:
        from .collect import prune_runs

        return prune_runs(os.path.join(self._pdir(key), "runs"), keep)

    def _maybe_collect(self) -> None:
        over = (
            self._size_at_gc is not None
            and self._size_at_gc + self._written > self.limits.max_store
        )
        if self._size_at_gc is None or over or self._pruned >= GC_EVERY_PRUNES:
            self.collect()

    def usage(self) -> dict[str, Any]:
        """For health: ``{path, bytes, runs, projects}`` (``collect.usage``)."""
        from .collect import usage

        return usage(self)

    def collect(self) -> dict[str, int]:
        """Enforce retention now (``collect.collect``): returns ``{bytes, removed_blobs,
        removed_runs}``."""
        from .collect import collect

        return collect(self)


__all__ = [
    "ChangeSet",
    "ChangeStore",
    "Limits",
    "NotRecorded",
    "Token",
    "entry_from_json",
    "entry_to_json",
]
