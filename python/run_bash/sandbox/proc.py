"""Process-tree plumbing shared by the runtime and the backends: subreaper, tags, sweeps.

Every command runs with ``RUN_BASH_SESSION=<id>`` in its environment. The host is a child subreaper, so
a process that escapes its tree (``setsid``, double fork, ``nohup … &``) is reparented to the host, where
the tag (read from ``/proc/<pid>/environ``) still says which session it belongs to. Pids are always
paired with their start time so a recycled pid is never signalled.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import time
from collections.abc import Iterable
from functools import lru_cache

SESSION_TAG = "RUN_BASH_SESSION"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
KILL_GRACE_S = 2.0

_libc = ctypes.CDLL(None, use_errno=True)


def set_child_subreaper() -> bool:
    """Make this process the subreaper of its descendants; False when the kernel refuses."""
    rc: int = _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return rc == 0


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies."""
    rc: int = _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    return rc == 0


@lru_cache(maxsize=1)
def bash_path() -> str | None:
    """Absolute path of bash, resolved once."""
    return shutil.which("bash") or ("/bin/bash" if os.path.exists("/bin/bash") else None)


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/pid/stat), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (all threads)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return out


def adopted(owner: int) -> list[int]:
    """The children of subreaper ``owner`` where its orphans are: those of its leader thread.
    The kernel gives an orphan to the first live thread of the subreaper's group (the leader,
    which in this process runs the loop), whichever thread started its parent; reading the
    leader's list alone saves a file per thread (the host has about ten)."""
    try:
        with open(f"/proc/{owner}/task/{owner}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return children(owner)


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid``, parents before children."""
    out: list[int] = []
    stack = [pid]
    seen = {pid}
    while stack:
        for child in children(stack.pop()):
            if child not in seen:
                seen.add(child)
                out.append(child)
                stack.append(child)
    return out


def lease_holders(limit: int = 1 << 20) -> set[int]:
    """The processes holding a file lease or delegation now, by ``/proc/locks`` (the kernel's
    list, pids as this process sees them). Any other process's open of a leased file breaks the
    lease: the holder is signalled (SIGIO, which kills it unless handled) and the opener waits
    for it. Queued requests (``->``) are not holders. Empty when the list cannot be read."""
    try:
        with open("/proc/locks", "rb") as f:
            text = f.read(limit)
    except OSError:
        return set()
    held: set[int] = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[1] in (b"LEASE", b"DELEG") and fields[4].isdigit():
            held.add(int(fields[4]))
    return held


# A process in the middle of execve(2) shows an empty environment for a moment (its new memory
# has no environment yet): how long to wait for the exec to end before taking "empty" as final.
EXEC_SETTLE_S = 0.2


def session_tag(pid: int) -> str | None:
    """The ``RUN_BASH_SESSION`` value in the environment of ``pid``, if readable."""
    deadline = time.monotonic() + EXEC_SETTLE_S
    while True:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            return None
        if data or time.monotonic() >= deadline or is_zombie(pid):
            break
        time.sleep(0.002)
    prefix = SESSION_TAG.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None


def signal_group(pgid: int, sig: int) -> None:
    """Signal a process group, ignoring one that is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2 :][:1] in (b"Z", b"X")


class Tracker:
    """The processes of one run: its root's tree plus orphans carrying its tag.

    ``owner`` is the process that orphans are reparented to (this process, a subreaper).
    """

    def __init__(self, session_id: str, root: int, owner: int | None = None) -> None:
        self.session_id = session_id
        self.root = root
        self.owner = owner if owner is not None else os.getpid()
        self.known: dict[int, int] = {}  # pid -> start time
        self.remember([root])

    def remember(self, pids: Iterable[int]) -> None:
        for pid in pids:
            if pid not in self.known:
                st = start_time(pid)
                if st is not None:
                    self.known[pid] = st

    def members(self, exclude: Iterable[int] = ()) -> list[int]:
        """Live processes of this run (not zombies), pid+start-time checked, parents before
        their children: signalled in this order, no parent outlives a child's death by the
        moment it takes to signal the next one (a ``bash`` that saw its ``sleep`` killed would
        otherwise run its next command)."""
        skip = set(exclude)
        found: dict[int, None] = {}
        if start_time(self.root) == self.known.get(self.root):
            found[self.root] = None
            found.update(dict.fromkeys(descendants(self.root)))
        for child in adopted(self.owner):
            if child in skip or child in found:
                continue
            if child in self.known or session_tag(child) == self.session_id:
                found[child] = None
                found.update(dict.fromkeys(descendants(child)))
        self.remember(found)
        return [p for p in found if start_time(p) == self.known.get(p) and not is_zombie(p)]

    def signal(self, sig: int, exclude: Iterable[int] = ()) -> int:
        """Send ``sig`` to every live member; return how many were signalled."""
        count = 0
        for pid in self.members(exclude):
            try:
                os.kill(pid, sig)
                count += 1
            except (ProcessLookupError, PermissionError):
                pass
        return count

    def reap_orphans(self) -> None:
        """Reap zombie orphans of this run that were reparented to ``owner``."""
        for pid in list(self.known):
            if pid == self.root:
                continue
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def sweep(
    trackers: Iterable[Tracker], grace_s: float = KILL_GRACE_S, exclude: Iterable[int] = ()
) -> int:
    """TERM every member of ``trackers``, wait up to ``grace_s``, KILL what is left; return survivors."""
    trackers = list(trackers)
    excl = list(exclude)
    for t in trackers:
        t.signal(signal.SIGTERM, excl)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for t in trackers:
            t.reap_orphans()
        if not any(t.members(excl) for t in trackers):
            return 0
        time.sleep(0.02)
    for t in trackers:
        t.signal(signal.SIGKILL, excl)
    time.sleep(0.02)
    for t in trackers:
        t.reap_orphans()
    return sum(len(t.members(excl)) for t in trackers)


def sweep_all_descendants(owner: int | None = None, grace_s: float = 0.5) -> None:
    """Kill every descendant of ``owner`` (default: this process): the exit path of the host."""
    owner = owner if owner is not None else os.getpid()
    pids = {p: start_time(p) for p in descendants(owner)}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(
        start_time(p) == st and not is_zombie(p) for p, st in pids.items()
    ):
        time.sleep(0.02)
    for pid in set(pids) | set(descendants(owner)):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in children(owner):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
