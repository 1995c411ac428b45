"""Control groups for runs: the kernel caps a whole run's memory (and, for bubblewrap, its tasks).

``RLIMIT_DATA`` counts one process at a time: two processes of 2.5 GiB each pass a 4 GiB limit. A
memory cgroup counts every process of the run together (their anonymous memory, the page cache they
fill, and the files of the run's temp space, which is a tmpfs: ``tempfs.py``). Each run of a
confining backend gets its own cgroup below this host's (``run_bash-<host pid>/…``), its processes
are placed in it before the command is executed (the run's first process writes ``0`` into
``cgroup.procs``, moving itself; everything it starts inherits the cgroup), and it is removed when
the run has ended. Moving a process costs an RCU grace period (milliseconds): sandlock's launcher
has its spare process move into a new cgroup while it waits for the next request
(``enter_new``), so a sandlock run only sets the cap; bubblewrap's first process moves when the
run starts.

Where the cgroups come from (``Cgroups.find``), per controller:

* **cgroup v2** (one unified hierarchy): the deepest cgroup on the path from this process's own up
  to the root that has the controller enabled for its children (``cgroup.subtree_control``) and
  whose ``cgroup.procs`` this user may write: the root for root on a machine without a service
  manager in the way, or a cgroup delegated to the user. v2 does not let a cgroup with processes
  enable controllers for its children, so the host's own cgroup qualifies only as the root;
  controllers are never enabled here except in the host's own parent (``host_dir``).
* **cgroup v1** (a hierarchy per controller, as on older hybrid systems): this process's own
  cgroup in the controller's hierarchy, when this user may create cgroups in it.

Where none is found the cap is per process (bubblewrap: ``RLIMIT_DATA``) or sandlock's own
accounting, and ``:checkhealth run_bash`` says so (``Cgroups.describe``).

What is set: v2 ``memory.max`` = ``max_memory`` and ``memory.swap.max`` = 0 (RAM and swap
together stay under the cap); v1 ``memory.limit_in_bytes`` and, with swap accounting,
``memory.memsw.limit_in_bytes`` (RAM plus swap). With ``tasks=True`` (bubblewrap), ``pids.max`` =
``max_processes`` plus the run's own wrappers (``WRAPPER_TASKS``); threads count there, as they do
for bubblewrap's per-namespace ``pid_max``. When the kernel kills a process of the run for memory,
the run's result says so (``RunCgroup.oom_kills``).

A run cannot leave its cgroup or change its limits: ``/sys`` is read-only inside both sandboxes.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger("run_bash")

PREFIX = "run_bash-"
CONTROLLERS = ("memory", "pids")
# Tasks of a bubblewrap run that are not the command's: the namespace's first process (the
# wrapper that becomes bwrap) and bwrap's init inside the sandbox.
WRAPPER_TASKS = 2
# How long removing a run's cgroup waits for its last processes to be gone: when the run ends
# (its launcher process may still be exiting), and when the host ends.
RELEASE_WAIT_S = 0.05
REMOVE_WAIT_S = 1.0

_PROC_CGROUP = "/proc/self/cgroup"
_MOUNTINFO = "/proc/self/mountinfo"
_HOST_DIR = re.compile(re.escape(PREFIX) + r"(\d+)$")


@dataclass(frozen=True)
class Place:
    """Where the cgroups of one controller are made: ``base`` (an existing cgroup directory)
    and the hierarchy's version."""

    controller: str
    version: int
    base: str


@dataclass
class RunCgroup:
    """One run's cgroups: one directory per hierarchy (v2: one for both controllers)."""

    session_id: str
    dirs: dict[str, int] = field(default_factory=dict)  # directory -> cgroup version
    memory: str = ""  # the directory holding the memory controller's files
    max_memory: int = 0

    @property
    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files the run's first process writes ``0`` into."""
        return [os.path.join(d, "cgroup.procs") for d in self.dirs]

    def oom_kills(self) -> int:
        """How many processes of the run the kernel killed for going over the memory cap."""
        if not self.memory:
            return 0
        name = "memory.events" if self.dirs.get(self.memory) == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.memory, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def notices(self) -> list[str]:
        """What the run's result says about its memory cap (when the kernel enforced it)."""
        killed = self.oom_kills()
        if not killed:
            return []
        from run_bash.statedir import human_size

        what, verb = ("a process", "was") if killed == 1 else (f"{killed} processes", "were")
        return [
            f"{what} of this run {verb} killed by the kernel: the run's memory (all its processes "
            f"together, temp files included) reached its cap of {human_size(self.max_memory)} "
            "(sandbox.limits.max_memory)"
        ]

    def pids(self) -> set[int]:
        """Processes still in the run's cgroups."""
        found: set[int] = set()
        for path in self.procs:
            with contextlib.suppress(OSError, ValueError), open(path) as f:
                found.update(int(x) for x in f.read().split())
        return found

    def remove(self, wait_s: float = REMOVE_WAIT_S) -> bool:
        """Remove the run's cgroups once nothing is left in them (what is, is killed first).
        False when one could not be removed in ``wait_s`` (``Cgroups.collect`` tries again)."""
        deadline = time.monotonic() + wait_s
        pause = 0.0002  # a process that is exiting is gone in well under a millisecond
        for d in sorted(self.dirs, key=len, reverse=True):
            while True:
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        return False
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                if time.monotonic() >= deadline:
                    return False
                time.sleep(pause)
                pause = min(pause * 2, 0.01)
        return True


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@dataclass(frozen=True)
class Mount:
    version: int
    controllers: frozenset[str]  # v1: the mount's controllers; v2: empty (read from the tree)
    root: str  # the hierarchy path mounted here
    point: str


def mounts(mountinfo: str) -> list[Mount]:
    """The cgroup mounts listed in ``mountinfo`` (the text of /proc/self/mountinfo)."""
    out: list[Mount] = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        rest = right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        kind = rest[0]
        root, point = _unescape(fields[3]), _unescape(fields[4])
        if kind == "cgroup2":
            out.append(Mount(2, frozenset(), root, point))
        elif kind == "cgroup":
            opts = frozenset(rest[2].split(","))
            out.append(Mount(1, opts & frozenset(CONTROLLERS), root, point))
    return out


def _unescape(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def memberships(text: str) -> dict[str, str]:
    """This process's cgroup per hierarchy, from /proc/self/cgroup: ``"2"`` -> the v2 path,
    ``"memory"`` / ``"pids"`` -> the v1 paths."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, names, path = parts
        if hid == "0" and names == "":
            out["2"] = path
        for name in names.split(","):
            if name in CONTROLLERS:
                out[name] = path
    return out


def _under(mount: Mount, path: str) -> str | None:
    """The directory of cgroup ``path`` through ``mount``; None when the mount does not show it."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/") and root:
        return None
    rel = path[len(root) :].lstrip("/")
    return os.path.join(mount.point, rel) if rel else mount.point


def _writable(d: str) -> bool:
    return os.access(d, os.W_OK | os.X_OK) and os.access(os.path.join(d, "cgroup.procs"), os.W_OK)


def find_places(mountinfo: str, self_cgroup: str) -> tuple[dict[str, Place], str]:
    """Where each controller's run cgroups can be made, and why memory has none ("" when it
    has)."""
    places: dict[str, Place] = {}
    member = memberships(self_cgroup)
    all_mounts = mounts(mountinfo)
    why = "no cgroup hierarchy with the memory controller is mounted"
    for controller in CONTROLLERS:
        v1 = [m for m in all_mounts if m.version == 1 and controller in m.controllers]
        for m in v1:
            if controller not in member:
                continue
            d = _under(m, member[controller])
            if d is None or not os.path.isdir(d):
                continue
            if _writable(d):
                places[controller] = Place(controller, 1, d)
                break
            if controller == "memory":
                why = f"the memory cgroup {d} (cgroup v1) is not writable by this user"
        if controller in places or v1:
            continue
        for m in (m for m in all_mounts if m.version == 2):
            if "2" not in member:
                continue
            start = _under(m, member["2"])
            if start is None:
                continue
            if controller not in _read(os.path.join(m.point, "cgroup.controllers")).split():
                continue
            d = start
            while True:
                enabled = _read(os.path.join(d, "cgroup.subtree_control")).split()
                if controller in enabled and _writable(d):
                    places[controller] = Place(controller, 2, d)
                    break
                if d == m.point or not d.startswith(m.point):
                    break
                d = os.path.dirname(d)
            if controller in places:
                break
            if controller == "memory":
                why = (
                    f"no cgroup between {start} and the root (cgroup v2) has the memory "
                    "controller enabled for its children and is writable by this user"
                )
    return places, ("" if "memory" in places else why)


class Cgroups:
    """Where this host makes its runs' cgroups (found once), and the runs' cgroups themselves."""

    def __init__(self, mountinfo: str = _MOUNTINFO, self_cgroup: str = _PROC_CGROUP) -> None:
        self._mountinfo = mountinfo
        self._self_cgroup = self_cgroup
        self._lock = threading.Lock()
        self._places: dict[str, Place] | None = None
        self._why = ""
        self._owner = -1
        self._host_dirs: dict[str, str] = {}  # base -> this host's parent cgroup under it
        self._pending: list[RunCgroup] = []  # ended runs whose cgroups are still busy

    def places(self) -> dict[str, Place]:
        """Where each controller's cgroups are made (found on first use, in this process)."""
        with self._lock:
            if self._places is None or self._owner != os.getpid():
                self._places, self._why = find_places(
                    _read(self._mountinfo), _read(self._self_cgroup)
                )
                self._owner = os.getpid()
                self._host_dirs = {}
                self._pending = []
                for place in self._places.values():
                    remove_stale(place.base)
            return self._places

    @property
    def why_not(self) -> str:
        """Why there is no memory cgroup for runs ("" when there is one)."""
        self.places()
        return self._why

    def describe(self) -> tuple[bool, str]:
        """(whether runs get a memory cgroup, a sentence saying where or why not)."""
        places = self.places()
        if "memory" not in places:
            return False, self._why
        mem = places["memory"]
        text = f"memory cgroup per run under {mem.base} (cgroup v{mem.version})"
        if "pids" in places:
            text += f"; pids under {places['pids'].base}"
        return True, text

    def warm(self) -> None:
        """Find where runs' cgroups are made and make this host's parents there now (the first
        ``make`` does it otherwise); once: after that it touches no file (it is called on the
        host's loop after every run; ``make`` checks the parents are still there). Raises
        OSError."""
        places = self.places()
        if any(place.base not in self._host_dirs for place in places.values()):
            for place in places.values():
                self._host_dir(place)

    def make(self, session_id: str, max_memory: int, tasks: int | None = None) -> RunCgroup | None:
        """A new run's cgroups with its memory cap (and, when ``tasks`` is given, its task cap);
        None when there is no memory cgroup here. Raises OSError when one cannot be made."""
        places = self.places()
        if "memory" not in places:
            return None
        self.collect()
        wanted = ["memory", *(["pids"] if tasks is not None and "pids" in places else [])]
        run = RunCgroup(session_id, max_memory=max_memory)
        try:
            for controller in wanted:
                place = places[controller]
                parent = self._host_dir(place)
                d = os.path.join(parent, _safe(session_id))
                if d not in run.dirs:
                    os.mkdir(d, 0o755)
                    run.dirs[d] = place.version
                if controller == "memory":
                    run.memory = d
                    set_memory(d, place.version, max_memory)
                else:
                    assert tasks is not None
                    _write(os.path.join(d, "pids.max"), str(tasks + WRAPPER_TASKS))
        except OSError:
            run.remove(0)
            raise
        return run

    def _host_dir(self, place: Place) -> str:
        """This host's parent cgroup under ``place`` (created on first use)."""
        with self._lock:
            d = self._host_dirs.get(place.base)
            if d is None or not os.path.isdir(d):
                d = host_dir(place, os.getpid())
                self._host_dirs[place.base] = d
            return d

    def release(self, run: RunCgroup) -> None:
        """Remove an ended run's cgroups; when something of it is still dying after
        ``RELEASE_WAIT_S``, later (the next run, or the host's end)."""
        if not run.remove(RELEASE_WAIT_S):
            with self._lock:
                self._pending.append(run)

    def collect(self) -> None:
        """Try again to remove the cgroups of ended runs that were still busy."""
        with self._lock:
            pending, self._pending = self._pending, []
        for run in pending:
            if not run.remove(0):
                with self._lock:
                    self._pending.append(run)

    def close(self) -> None:
        """Remove every cgroup this host made (its runs have ended)."""
        if self._places is None or self._owner != os.getpid():
            return
        self.collect()
        with self._lock:
            pending, self._pending = self._pending, []
            parents = list(self._host_dirs.values())
            self._host_dirs = {}
        for run in pending:
            run.remove()
        for place in (self._places or {}).values():  # what the launcher made here too
            parents.append(os.path.join(place.base, f"{PREFIX}{os.getpid()}"))
        for d in dict.fromkeys(parents):
            _remove_tree(d)


def host_dir(place: Place, host: int) -> str:
    """Host ``host``'s parent cgroup under ``place``, created when missing (v2: with the
    controllers enabled for its children). Raises OSError."""
    d = os.path.join(place.base, f"{PREFIX}{host}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(d, 0o755)
    if place.version == 2:
        enabled = _read(os.path.join(d, "cgroup.subtree_control")).split()
        have = _read(os.path.join(d, "cgroup.controllers")).split()
        wanted = [c for c in CONTROLLERS if c not in enabled and c in have]
        if wanted:
            _write(os.path.join(d, "cgroup.subtree_control"), " ".join(f"+{c}" for c in wanted))
    return d


def enter_new(place: Place, host: int, name: str) -> str:
    """Make cgroup ``name`` under host ``host``'s parent and move this process into it (the
    kernel waits for an RCU grace period on every such move: milliseconds, which is why the
    launcher's spare processes do it while they wait for a request). Returns its directory.
    Raises OSError (nothing is left behind)."""
    d = os.path.join(host_dir(place, host), _safe(name))
    os.mkdir(d, 0o755)
    try:
        _write(os.path.join(d, "cgroup.procs"), "0")
    except OSError:
        with contextlib.suppress(OSError):
            os.rmdir(d)
        raise
    return d


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "run"


def set_memory(d: str, version: int, limit: int) -> None:
    """Cap the memory of cgroup ``d`` (RAM and swap together) at ``limit`` bytes."""
    if version == 2:
        _write(os.path.join(d, "memory.max"), str(limit))
        swap = os.path.join(d, "memory.swap.max")
        if os.path.exists(swap):
            _write(swap, "0")
        return
    _write(os.path.join(d, "memory.limit_in_bytes"), str(limit))
    memsw = os.path.join(d, "memory.memsw.limit_in_bytes")
    if os.path.exists(memsw):
        _write(memsw, str(limit))


def _remove_tree(d: str) -> None:
    """Remove cgroup ``d`` and the cgroups below it (empty ones: processes are not killed)."""
    with contextlib.suppress(OSError):
        for child in os.scandir(d):
            if child.is_dir(follow_symlinks=False):
                _remove_tree(child.path)
        os.rmdir(d)


def remove_stale(base: str) -> int:
    """Remove the empty cgroups of hosts that are gone (``run_bash-<pid>`` whose process no
    longer exists) below ``base``; return how many host directories went."""
    n = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            m = _HOST_DIR.match(entry.name)
            if not m or not entry.is_dir(follow_symlinks=False):
                continue
            pid = int(m.group(1))
            if pid == os.getpid() or os.path.exists(f"/proc/{pid}"):
                continue
            _remove_tree(entry.path)
            n += not os.path.exists(entry.path)
    return n


class SpareCgroup:
    """The cgroup a spare moved into while it waited for a request (``cgroups.enter_new``):
    ``place`` is where runs' memory cgroups are made (None: nowhere here), ``host`` the host's
    pid, ``path`` the spare's own cgroup ("" when it has none)."""

    def __init__(self, place: Place | None = None, host: int = 0, path: str = "") -> None:
        self.place = place
        self.host = host
        self.path = path


def cap_memory(limit: int, spare_cg: SpareCgroup) -> dict[str, int]:
    """Cap this run's memory at ``limit`` (0: no cap): in the cgroup the spare is in already,
    else in one made now. Returns the run's cgroups (directory -> version) for the host, which
    removes them when the run has ended; {} where no memory cgroup can be made. Raises OSError."""
    place = spare_cg.place
    if place is None or not (limit or spare_cg.path):
        return {}
    path = spare_cg.path or enter_new(place, spare_cg.host, f"run-{os.getpid()}")
    if limit:
        set_memory(path, place.version, limit)
    return {path: place.version}


CGROUPS = Cgroups()
