"""The change store: snapshots per project, one change set per run, undo, retention.

Layout under the store root (0700; the host's state dir, outside every sandbox's grants)::

    objects/packs/*.pack         blobs by SHA-256, one pack per walk that found new content
    tmp/                         temp files, renamed into place
    gc.lock                      shared by every begin/finish/undo, exclusive for a collection
    projects/<key>/              key = first 16 hex of sha256(project path)
        path                     the project's path
        lock                     flock: one walk at a time per project, across hosts
        state.json               snapshot generation, active runs, recently ended runs
        snap                     the latest snapshot (marshal; the stat cache of the next walk)
        snap-<gen>               older snapshots that runs still active began from
        runs/<seq>-<run>.json    change sets of runs that changed something

``state.json`` and ``snap`` are rewritten in place under the project lock (creating a file costs
0.65 ms on the file system measured here; rewriting one, 3 us); each carries a check so a write
torn by a crash reads as absent: the state restarts empty and the next walk reads every file.

Threading: every public method may be called from any worker thread, concurrently; none may run
on the RPC loop (they walk the project and read files the command controls). Per project, walks
are serialized by a thread lock plus ``flock``, so two hosts sharing the store also agree.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import marshal
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

from run_bash.statedir import human_size

from .objects import Objects
from .render import Change, ChangeSet, display_path, entry_from_json, entry_to_json
from .snapshot import (
    DIR_FLAGS,
    Entry,
    Snapshot,
    TooManyFiles,
    diff,
    merge,
    same_state,
    scan,
)
from .watch import Events, Watcher

MIB = 1024 * 1024
FORMAT = 1
HARD_FILES_FACTOR = 4  # a run may leave this many times max_files entries before the walk stops
RECENT_KEEP_S = 24 * 3600  # ended runs remembered for overlap detection
PROJECT_IDLE_S = 30 * 24 * 3600  # a project unused this long is dropped whole
WATCHED_PROJECTS = 8  # inotify instances kept (the default per-user limit is 128)
GC_EVERY_PRUNES = 16  # collect garbage after this many pruned change sets (or when over max_store)
SNAP_MAGIC = b"run_bash-snapshot-2\n"
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


@dataclass(frozen=True)
class NotRecorded:
    """``begin`` could not record this run; ``str()`` is the line to show. ``lasting``: the
    project itself is the reason (too many files, too large), so the next run there will most
    likely get the same answer, after the same walk."""

    reason: str
    lasting: bool = False

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


@dataclass
class _Pending:
    """A run that ended with a quick walk: the full walk that checks it is still to come."""

    project: str
    change_set: ChangeSet  # a private copy, amended if the check finds what inotify missed
    before: Snapshot
    after: Snapshot


class _Plan(TypedDict):
    """What undo would do: each change with the path's current state, or why it is left."""

    restore: list[tuple[Change, Entry, Entry | None]]  # (change, its earlier state, current)
    remove: list[tuple[Change, Entry | None]]
    conflicts: list[tuple[Change, str]]
    lost: list[tuple[Change, str]]


@dataclass
class _Project:
    snapshot: Snapshot | None = None  # the latest state (after a quick run end: memory only)
    disk: Snapshot | None = None  # what the ``snap`` file of generation ``gen`` holds
    gen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: _Pending | None = None


def _proc_start(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (tells a reused pid apart), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return None


def _write_atomic(path: str, data: bytes, tmp_dir: str) -> None:
    tmp = os.path.join(tmp_dir, "tmp-" + secrets.token_hex(8))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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


class ChangeStore:
    """Snapshots, change sets and undo for every project, in one directory.

    Args:
        root: the store directory (created 0700 if missing).
        limits: what is covered and kept.
        home: the user's home directory, never a project (default ``$HOME``).
        quick_finish: end a run by listing again only the directories inotify saw change, and
            check it with a full walk shortly after, off the caller's thread (False: every run
            ends with a full walk).
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
        self.home = os.path.realpath(home or os.path.expanduser("~"))
        self._mu = threading.Lock()
        self._projects: dict[str, _Project] = {}
        self._watchers: dict[str, Watcher] = {}  # insertion order = least recently used first
        self.walks = 0  # full walks done (the figures and tests read it)
        self.quick_walks = 0  # run ends that listed only the directories with events
        self.amended = 0  # change sets completed by the check after a quick end
        self.quick_finish = quick_finish
        self._to_check: dict[str, str] = {}  # project key -> path, quick ends not yet checked
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
        return hashlib.sha256(os.fsencode(project)).hexdigest()[:16]

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
    def _locked(self, key: str, project: str) -> Iterator[_Project]:
        with self._mu:
            proj = self._projects.setdefault(key, _Project())
        with self._gc_lock(), proj.lock:
            pdir = self._pdir(key)
            if not os.path.isdir(pdir):
                os.makedirs(os.path.join(pdir, "runs"), mode=0o700, exist_ok=True)
                _write_atomic(os.path.join(pdir, "path"), os.fsencode(project), self._tmp)
            fd = os.open(os.path.join(pdir, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield proj
            finally:
                os.close(fd)

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
        """Drop active runs whose host is gone, and ended runs too old to matter."""
        cutoff = time.time_ns() - RECENT_KEEP_S * 1_000_000_000
        alive = {}
        for rid, info in state["active"].items():
            pid_s, _, start = str(info.get("host", "")).partition(":")
            if pid_s.isdigit() and _proc_start(int(pid_s)) == (start or None):
                alive[rid] = info
        state["active"] = alive
        state["recent"] = [r for r in state["recent"] if r[2] >= cutoff][-200:]

    def _load_snapshot(self, key: str, proj: _Project, state: dict[str, Any]) -> Snapshot | None:
        gen = state["gen"]
        if proj.snapshot is not None and proj.gen == gen:
            return proj.snapshot
        got = _read_snapshot(os.path.join(self._pdir(key), "snap"))
        # A lost or torn cache only costs a full read of the project.
        snap = got[1] if got is not None and got[0] == gen else None
        proj.snapshot, proj.disk, proj.gen = snap, snap, gen
        return snap

    def _save_snapshot(
        self, key: str, proj: _Project, state: dict[str, Any], snap: Snapshot
    ) -> None:
        """Make ``snap`` the project's latest snapshot. The one it replaces is kept as
        ``snap-<gen>`` while an active run began from it (a collection must keep its blobs)."""
        if proj.disk is not None and proj.gen == state["gen"] and snap.dirs == proj.disk.dirs:
            proj.snapshot = snap
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
        proj.snapshot, proj.disk, proj.gen = snap, snap, gen
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
            w = self._watchers.pop(key, None)
            if w is None:
                w = Watcher()
                while len(self._watchers) >= WATCHED_PROJECTS:
                    self._watchers.pop(next(iter(self._watchers))).close()
            self._watchers[key] = w
            return w

    def close(self) -> None:
        """Finish pending checks and release the inotify instances (the host's shutdown). The
        store stays usable."""
        self.settle()
        with self._mu:
            for w in self._watchers.values():
                w.close()
            self._watchers.clear()

    def _scan(
        self,
        project: str,
        prev: Snapshot | None,
        finishing: bool,
        watcher: Watcher,
        known_only: bool = False,
        only: list[str] | None = None,
        events: Events | None = None,
    ) -> Snapshot:
        lim = self.limits
        if only is None:
            self.walks += 1
            watcher.begin_walk(events)
        else:
            self.quick_walks += 1
        try:
            fd = os.open(project, DIR_FLAGS)
        except FileNotFoundError:
            if not finishing:
                raise
            return Snapshot({}, taken_ns=time.time_ns())  # the run removed the project itself
        try:
            kw: dict[str, Any] = {
                "max_files": lim.max_files,
                "max_file_size": lim.max_file_size,
                "skip": self._store_id,
            }
            if known_only:
                kw.update(max_files=1 << 62, known_only=True)
            elif only is not None:
                kw.update(max_files=1 << 62, only=only)
            elif finishing:
                kw["hard_files"] = HARD_FILES_FACTOR * lim.max_files
            with self.objects.writer() as w:
                snap = scan(fd, prev, w, on_dir=watcher.add if watcher.usable else None, **kw)
        finally:
            os.close(fd)
        self._written += snap.blob_bytes_added
        return snap

    # -- public API ------------------------------------------------------------------------------

    def project_for(self, cwd: str) -> tuple[str | None, str | None]:
        """The project of a run started in ``cwd``: (path, None), or (None, why not).

        The project is the git top level of ``cwd`` (the nearest ancestor holding ``.git``), else
        ``cwd`` itself; when that top level is ``$HOME`` or ``/``, ``cwd`` alone. Never ``/``,
        ``$HOME`` or a directory that contains ``$HOME``.
        """
        try:
            cwd = os.path.realpath(cwd)
            if not os.path.isdir(cwd):
                return None, f"{cwd} is not a directory"
        except OSError as err:
            return None, f"cannot resolve {cwd}: {err.strerror}"
        top = None
        d = cwd
        while True:
            if os.path.lexists(os.path.join(d, ".git")):
                top = d
                break
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        project = top if top is not None and not self._too_wide(top) else cwd
        if project == "/":
            return None, "the project would be / (run in a project directory)"
        if self._too_wide(project):
            return None, "the project would be your home directory (run in a project directory)"
        return project, None

    def _too_wide(self, path: str) -> bool:
        return path == "/" or path == self.home or self.home.startswith(path.rstrip("/") + "/")

    def begin(
        self, run_id: str, cwd: str, *, undo_of: str | None = None, label: str | None = None
    ) -> Token | NotRecorded:
        """Record the project's state before a run starts (the command must not start before this
        returns). ``label`` (the command) is kept with the change set. Returns a Token for
        ``finish``, or NotRecorded with the reason."""
        project, why = self.project_for(cwd)
        if project is None:
            return NotRecorded(why or "no project")
        return self._begin(run_id, project, undo_of, label)

    def _begin(
        self, run_id: str, project: str, undo_of: str | None, label: str | None = None
    ) -> Token | NotRecorded:
        try:
            self._init()
        except OSError as err:
            return NotRecorded(f"the undo store {self.root} is unusable ({err.strerror})")
        key = self._key(project)
        try:
            with self._locked(key, project) as proj:
                state = self._read_state(key)
                self._live(state)
                self._check_locked(key, proj, state)
                prev = self._load_snapshot(key, proj, state)
                watcher = self._watcher(key)
                if prev is not None and watcher.gen == state["gen"] and not watcher.changed():
                    snap = prev  # inotify saw nothing since the last walk
                else:
                    snap = self._scan(project, prev, False, watcher)
                if snap.bytes > self.limits.max_store:
                    return NotRecorded(
                        f"the project's files take {human_size(snap.bytes)}, more than the store's "
                        f"{human_size(self.limits.max_store)} (undo.max_store)",
                        lasting=True,
                    )
                self._save_snapshot(key, proj, state, snap)
                watcher.end_walk(state["gen"])
                now = time.time_ns()
                state["active"][run_id] = {"host": self._me, "gen": state["gen"], "began": now}
                self._write_state(key, state)
        except TooManyFiles as err:
            return NotRecorded(
                f"the project has {err} (undo.max_files = {self.limits.max_files:,})",
                lasting=True,
            )
        except OSError as err:
            return NotRecorded(f"cannot read the project {project} ({err.strerror or err})")
        token = Token(run_id, project, key, snap, state["gen"], now, undo_of, label)
        with self._mu:
            self._active[run_id] = token
        return token

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
            self._check_locked(key, proj, state)
            prev = self._load_snapshot(key, proj, state)
            watcher = self._watcher(key)
            after, complete, quick = self._quick_after(project, proj, state, prev, watcher)
            if after is None:
                try:
                    try:
                        after = self._scan(project, prev or token.before, True, watcher)
                    except TooManyFiles as err:
                        # Still account for everything that was there before; new paths are
                        # listed where they start, neither entered nor read.
                        complete = False
                        note = f"the run left {err} in the project: new paths are not tracked"
                        after = self._scan(project, token.before, True, watcher, known_only=True)
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
            )
            if quick:
                # Kept in memory only: the check that follows writes the full walk's snapshot
                # (a crash before it costs the next host one full walk, nothing else).
                proj.snapshot = after
                watcher.end_walk(state["gen"])
                self._drop_old_snapshots(key, state)
            elif after is not None:
                self._save_snapshot(key, proj, state, after)
                if complete:  # a partial walk must not let the next start skip its walk
                    watcher.end_walk(state["gen"])
            else:
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
                proj.pending = _Pending(project, copy, token.before, after)
            self._write_state(key, state)
        if quick:
            self._schedule_check(key, project)
        self._maybe_collect()
        return cs

    def _quick_after(
        self,
        project: str,
        proj: _Project,
        state: dict[str, Any],
        prev: Snapshot | None,
        watcher: Watcher,
    ) -> tuple[Snapshot | None, bool, bool]:
        """The project now, listing again only the directories inotify saw change: (snapshot,
        complete, quick), or (None, ...) when a full walk is needed."""
        if not (
            self.quick_finish
            and prev is not None
            and prev is proj.snapshot
            and watcher.valid
            and watcher.gen == state["gen"]
        ):
            return None, True, False
        ev = watcher.take()
        if ev.structural or ev.unknown:
            return None, True, False
        try:
            part = self._scan(
                project, prev, True, watcher, only=sorted(ev.touched & prev.dirs.keys())
            )
        except OSError:
            return None, True, False
        after = merge(prev, part)
        if after.files > self.limits.max_files:
            return None, True, False
        return after, True, True

    def _schedule_check(self, key: str, project: str) -> None:
        with self._mu:
            self._to_check[key] = project
            if self._checker is None or not self._checker.is_alive():
                self._checker = threading.Thread(
                    target=self._check_loop, name="run_bash-changes-check", daemon=True
                )
                self._checker.start()
            self._wake.notify_all()

    def _check_loop(self) -> None:
        while True:
            with self._mu:
                if not self._to_check:
                    self._wake.wait(timeout=60.0)
                    if not self._to_check:
                        self._checker = None
                        return
                key, project = self._to_check.popitem()
                self._checking += 1
            try:
                self._check(key, project)
            except Exception:  # a failed check leaves the quick change set; never kill the loop
                log.exception("run_bash: checking the end of a run in %s failed", project)
            finally:
                with self._mu:
                    self._checking -= 1
                    self._wake.notify_all()

    def _check(self, key: str, project: str) -> None:
        with self._locked(key, project) as proj:
            if proj.pending is None:
                return
            state = self._read_state(key)
            self._check_locked(key, proj, state)
            self._write_state(key, state)

    def settle(self) -> None:
        """Run now the checks still due after quick run ends (``get``, ``undo`` and ``close``
        call it, so what they read is complete)."""
        with self._mu:
            due = dict(self._to_check)
            self._to_check.clear()
        for key, project in due.items():
            self._check(key, project)
        with self._mu:
            while self._checking:
                self._wake.wait()

    def _check_locked(self, key: str, proj: _Project, state: dict[str, Any]) -> None:
        """Walk the whole project after a quick run end; add to that run's change set what
        inotify did not report (writes through a shared mmap). Changes in directories with
        events since the run ended are someone else's and are not added."""
        pend = proj.pending
        if pend is None:
            return
        proj.pending = None
        watcher = self._watcher(key)
        since = watcher.take()
        latest = self._load_snapshot(key, proj, state)
        try:
            full = self._scan(pend.project, latest, False, watcher, events=since)
        except (TooManyFiles, OSError):
            return  # the watcher stays invalid: the next start walks and decides
        self._save_snapshot(key, proj, state, full)
        late = watcher.take()  # changes during the walk: it may have missed them
        since.merge(late)
        if not late:
            watcher.end_walk(state["gen"])
        if since.unknown or latest is not pend.after:
            return
        moved = since.moved
        missed = []
        for path, _was, now in diff(pend.after, full):
            parent = path.rpartition("/")[0]
            if parent in since.touched or parent not in pend.after.dirs:
                continue
            if any(a in moved for a in _ancestors(path)):
                continue
            missed.append((path, now))
        if not missed:
            return
        cs = pend.change_set
        by_path = {c.path: c for c in cs.changes}
        for path, now in missed:
            ch = by_path.get(path) or Change(path, pend.before.entry(path), None)
            ch.after = now
            by_path[path] = ch
        cs.changes = sorted(
            (c for c in by_path.values() if not same_state(c.before, c.after)),
            key=lambda c: os.fsencode(c.path),
        )
        cs.__post_init__()
        extra = "some changes were found by the full check after the run (inotify missed them)"
        cs.note = f"{cs.note}; {extra}" if cs.note else extra
        runs = os.path.join(self._pdir(key), "runs")
        if not cs.seq:
            last = max((int(n[:8]) for n in os.listdir(runs) if n[:8].isdigit()), default=0)
            state["seq"] = cs.seq = max(state["seq"], last) + 1
        rec = json.dumps(cs.to_json(), separators=(",", ":")).encode()
        _write_inplace(os.path.join(runs, f"{cs.seq:08d}-{cs.run_id}.json"), rec)
        self.amended += 1

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

    # -- reading change sets ---------------------------------------------------------------------

    def _records(self) -> list[tuple[str, int, str, str]]:
        """Every kept change set as (project key, seq, run id, file path), oldest first per project."""
        out: list[tuple[str, int, str, str]] = []
        base = os.path.join(self.root, "projects")
        try:
            keys = os.listdir(base)
        except FileNotFoundError:
            return out
        for key in keys:
            runs = os.path.join(base, key, "runs")
            with contextlib.suppress(OSError):
                for name in os.listdir(runs):
                    seq, _, rest = name.partition("-")
                    if seq.isdigit() and rest.endswith(".json"):
                        out.append((key, int(seq), rest[:-5], os.path.join(runs, name)))
        out.sort(key=lambda r: (r[0], r[1]))
        return out

    def get(self, run_id: str) -> ChangeSet | None:
        """The kept change set of ``run_id`` (the latest one with that id), or None."""
        self.settle()
        found = None
        for _key, _seq, rid, path in self._records():
            if rid == run_id:
                cs = self._read_record(path)
                if cs is not None and (found is None or cs.ended > found.ended):
                    found = cs
        return found

    def latest(self, project: str | None = None) -> ChangeSet | None:
        """The most recent kept change set (in ``project`` when given)."""
        self.settle()
        best = None
        key = self._key(project) if project else None
        for k, _seq, _rid, path in self._records():
            if key is None or k == key:
                cs = self._read_record(path)
                if cs is not None and (best is None or cs.ended > best.ended):
                    best = cs
        return best

    def runs(self) -> list[dict[str, Any]]:
        """Every kept change set, newest first, as {run, project, ended, counts, undo_of, label}."""
        self.settle()
        out: list[dict[str, Any]] = []
        for _k, _seq, _rid, path in self._records():
            cs = self._read_record(path)
            if cs is not None:
                out.append(
                    {
                        "run": cs.run_id,
                        "project": display_path(cs.project),
                        "ended": cs.ended,
                        "counts": cs.counts(),
                        "undo_of": cs.undo_of,
                        "label": cs.label,
                    }
                )
        out.sort(key=lambda r: -r["ended"])
        return out

    def kept_ids(self) -> set[str]:
        """The run ids whose change sets are kept now. Cheap (lists the run directories, reads
        no record, waits for no check): for callers deciding what to remember about a run."""
        return {rid for _k, _seq, rid, _path in self._records()}

    @staticmethod
    def _read_record(path: str) -> ChangeSet | None:
        try:
            with open(path, "rb") as f:
                return ChangeSet.from_json(json.load(f))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def changes(self, run_id: str) -> list[dict[str, Any]] | None:
        """``[{path, kind, skipped?}]`` for ``run_id``; None when no change set is kept for it."""
        cs = self.get(run_id)
        return None if cs is None else cs.to_list()

    def diff_text(self, run_id: str) -> str | None:
        """The run's change set as a unified diff (binary files by size and hash), or None."""
        cs = self.get(run_id)
        if cs is None:
            return None
        self._init()
        return cs.unified_diff(self.objects)

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
        runs = os.path.join(self._pdir(key), "runs")
        names = sorted(n for n in os.listdir(runs) if n.endswith(".json"))
        gone = 0
        for name in names[: max(0, len(names) - keep)]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(runs, name))
                gone += 1
        return gone

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
