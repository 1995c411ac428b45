"""Prepared sandboxes: the sandbox of a project's next run, built before its command is known.

A confining backend builds a spare (``prepare``) exactly as it would start a run in that project —
the run's mount and network namespaces, binds, temp space, cgroup, limits and sandlock's policy or
bwrap's sandbox, with the run's environment — but the program it starts is ``TRAMPOLINE``: bash,
waiting on a pipe from the host. Taking the spare writes the command into that pipe; bash reads
it, points its stdin at ``/dev/null``, drops its own two variables and runs the command with
``eval`` in that same process, so nothing of the sandbox's set-up is left on the command's path.
Each spare is used once and has its own process, temp space, cgroup and output pipe; nothing of
one run is visible to the next.

A spare is used only for a run that would get exactly the same sandbox now (``Spare.usable``):

* the backend's request for this run, computed now (policy, host-read set and protections,
  cwd, environment, limits, network namespace), is equal to the one the spare was built from
  (``key``). It is not computed again when nothing it is made from changed (``Planned``): the
  same policy object (kept while everything computing it read is the same), the same run, and
  every path planning looked at the same, which inotify vouches for (``fsdeps``);
* every path the sandbox grants, binds or hides, and the cwd, is still the same inode
  (``identities``: a mount or a Landlock rule holds the inode it was given, not the name);
* the host's mount table has not changed since (``MountWatch``: the kernel says so);
* the spare is still alive and its backend instance is the one runs use (a new ``setup()``
  makes new ones).

Anything else discards it; a run then starts the usual way.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import select
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypeVar

from run_bash import fsdeps

T = TypeVar("T")


class Process(Protocol):
    """What a spare needs of its backend's started run (``base.Launched``)."""

    pid: int
    session_id: str

    def pidfd(self) -> int: ...

    def kill_all(self) -> None: ...

    def close(self) -> None: ...


# The program a spare runs: it reads "<length>\n<command>" from its stdin (read byte-exact: the
# length in bytes, read in the C locale), takes stdin from /dev/null and runs the command in
# itself. A pipe closed without a command ends it (status 125).
TRAMPOLINE = (
    'read -r __n || exit 125; LC_ALL=C IFS= read -r -N "$__n" __c || exit 125; '
    'exec </dev/null; eval "unset __n __c;$__c"'
)
# Longest command (in bytes) sent to a spare: it must fit in the pipe at once, so writing it
# never waits for the spare. Longer ones start the usual way.
MAX_CMD_BYTES = 60 * 1024
F_GETPIPE_SZ = 1032

Ident = tuple[object, ...]


def identity(path: str) -> Ident:
    """What a mount or a Landlock rule made of ``path`` now would hold: the inode of the name
    itself (type, and a symlink's text) and of what it leads to."""
    try:
        st = os.lstat(path)
    except OSError:
        return (None,)
    if not stat.S_ISLNK(st.st_mode):  # it leads to itself
        return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), None, (st.st_dev, st.st_ino))
    link = None
    with contextlib.suppress(OSError):
        link = os.readlink(path)
    try:
        to = os.stat(path)
        target: tuple[int, int] | None = (to.st_dev, to.st_ino)
    except OSError:
        target = None
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), link, target)


def identities(paths: Iterable[str]) -> tuple[Ident, ...]:
    """``identity`` of each path, in order."""
    return tuple(identity(p) for p in paths)


class MountWatch:
    """Whether the host's mount table changed: the kernel flags ``/proc/self/mountinfo`` (poll:
    ``POLLPRI``) after every mount or unmount in this mount namespace. ``generation()`` counts
    the changes seen so far; None when the table cannot be watched (spares are then never used)."""

    def __init__(self, path: str = "/proc/self/mountinfo") -> None:
        self._lock = threading.Lock()
        self._gen = 0
        self._poll: select.poll | None = None
        self._fd = -1
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            self._poll = select.poll()
            self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
            self._poll.poll(0)  # the first poll reports nothing; it sets the baseline
        except OSError:
            self._poll = None

    def generation(self) -> int | None:
        with self._lock:
            if self._poll is None:
                return None
            try:
                if self._poll.poll(0):
                    self._gen += 1
            except OSError:
                self._poll = None
                return None
            return self._gen


_MOUNTS: MountWatch | None = None
_MOUNTS_LOCK = threading.Lock()


def mounts() -> MountWatch:
    """This process's watch of the mount table (made on first use)."""
    global _MOUNTS
    with _MOUNTS_LOCK:
        if _MOUNTS is None:
            _MOUNTS = MountWatch()
        return _MOUNTS


def high_fd_base() -> int:
    """Where a spare's descriptors are kept: far above the low numbers programs pick for
    ``dup2`` (a spare's descriptors live across runs, and an embedding process — a test, a
    plugin host — may ``dup2`` over a number it thinks is free)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(3, min(soft // 2, 16384))


def grow_fd_table() -> None:
    """Make this process's descriptor table reach ``high_fd_base()`` now. Call it while the
    process has one thread: the kernel grows a table shared by several threads only after an
    RCU grace period (5-10 ms here), which the first prepared sandbox would otherwise wait for."""
    with contextlib.suppress(OSError):
        os.close(fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, high_fd_base()))


def lift(fd: int) -> int:
    """``fd`` moved to a close-on-exec number at or above ``high_fd_base()`` (the old number is
    closed); ``fd`` itself when that fails."""
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, high_fd_base())
    except OSError:
        return fd
    os.close(fd)
    return high


def pipe_room(fd: int) -> int:
    """How many bytes the pipe ``fd`` holds without its writer waiting."""
    try:
        return int(fcntl.fcntl(fd, F_GETPIPE_SZ))
    except OSError:
        return 4096


# Where a file planning read may change without an inotify event (a shared writable mapping made
# before the watch): anywhere. Every regular file a plan read is stat'ed again when a run takes
# the spare; a plan reads few (it mostly asks whether paths exist, which the watches answer).
ANYWHERE = ("/",)
# The fields of a run's spec a plan is not made from: its descriptors (a run takes a spare with
# other pipes than the ones the spare was built with), whether it is a spare, and the policy
# (compared as the same object: ``Planned``).
_NOT_PLANNED = frozenset({"policy", "stdout_fd", "stderr_fd", "stdin_fd", "prepared"})


def plan_inputs(spec: Any, *more: object) -> tuple[object, ...]:
    """What a backend's plan for the run ``spec`` (a ``base.RunSpec``) is made from besides its
    policy: every other field of the spec (a field added later counts too), then ``more`` (the
    backend's own: the program, the network namespace, the cgroup, and what is not on the file
    system: the temp space's size, which moves with the memory available)."""
    return (
        *(getattr(spec, f.name) for f in fields(spec) if f.name not in _NOT_PLANNED),
        *more,
    )


@dataclass(eq=False)
class Planned:
    """How a spare's plan was made: from ``policy`` (that object) and ``inputs``
    (``plan_inputs``), reading ``reads``. A run that takes the spare with the same policy object
    and inputs, while everything planning read is the same (``fsdeps``), would get the very same
    plan: the backend does not make it again (``spare_key``). Once armed (``arm``: the watches
    that vouch for what planning read are set, after the spare is ready), that is the watches'
    word and the stats they leave; before (a run that came at once, back to back), one look at
    every path planning read (``Reads.look``), which costs less than arming or planning again."""

    policy: object
    inputs: tuple[object, ...]
    reads: fsdeps.Reads
    armed: bool = False

    def same(self, policy: object, inputs: tuple[object, ...]) -> bool:
        if policy is not self.policy or inputs != self.inputs:
            return False
        return self.reads.still(ANYWHERE) if self.armed else self.reads.look()

    def arm(self) -> bool:
        """Set the watches, looking at each path once more; False when something changed
        since planning (``same`` then never holds)."""
        self.armed = self.reads.still(ANYWHERE)
        return self.armed


def planning(
    policy: object, inputs: tuple[object, ...], plan: Callable[[], T]
) -> tuple[T, Planned | None]:
    """``plan()`` made while noting what it reads, and how it was made (``Planned``); None when
    what it read cannot be vouched for later (``fsdeps``: a descriptor, a change too recent to
    tell from the next one)."""
    with fsdeps.recording() as reads:
        out = plan()
    if not (reads.usable and reads.settled):
        return out, None
    return out, Planned(policy, inputs, reads)


@dataclass(eq=False)
class Spare:
    """A prepared sandbox (see the module docstring), as its backend made it.

    ``launched``: the started trampoline (its tag, ``launched.session_id``, is in its
    environment as ``RUN_BASH_SESSION``). ``key``: what the backend built it from
    (``planned``: how, when that can be vouched for later); ``paths``
    and ``idents``: every path it holds and the inode each was then; ``mounts``: the mount
    table's generation before it was built. ``notes``: what the backend would tell the run that
    takes it. The host side (``sessions/spares.py``) fills in the pipes and the temp dir.
    """

    backend: object
    cwd: str
    launched: Process
    key: object
    paths: tuple[str, ...]
    idents: tuple[Ident, ...]
    mounts: int | None
    notes: list[str] = field(default_factory=list)
    tmpdir: str = ""
    project: str = ""
    pipe_r: int = -1  # the read end of its output pipe
    cmd_w: int = -1  # the write end of its command pipe
    made: float = field(default_factory=time.monotonic)
    planned: Planned | None = None
    # The warnings of the policy it was made from: its notes tell them to the run that takes it.
    warnings: tuple[str, ...] = ()
    # Made from a kept policy instead of one computed for it (``sessions/spares.py``).
    guessed: bool = False

    @property
    def tag(self) -> str:
        return self.launched.session_id

    def alive(self) -> bool:
        """Whether the trampoline still waits (its process has not exited)."""
        try:
            fd = self.launched.pidfd()
        except (ProcessLookupError, OSError):
            return False
        try:
            return not select.select([fd], [], [], 0)[0]
        finally:
            os.close(fd)

    def stale(self) -> str:
        """Why the sandbox this spare holds is not what it was built on ("" when it is): a path
        that now names another inode, a changed mount table, or the spare gone."""
        gen = mounts().generation()
        if gen is None or gen != self.mounts:
            return "the mount table changed"
        now = identities(self.paths)
        if now != self.idents:
            for path, a, b in zip(self.paths, self.idents, now, strict=True):
                if a != b:
                    return f"{path} changed"
        if not self.alive():
            return "it exited"
        return ""

    def send(self, cmd: str) -> None:
        """Give the waiting bash its command. Raises OSError (the spare is gone, or the command
        does not fit the pipe: ``fits`` first)."""
        data = os.fsencode(cmd)
        msg = b"%d\n" % len(data) + data
        fd, self.cmd_w = self.cmd_w, -1
        try:
            view = memoryview(msg)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)

    def fits(self, cmd: str) -> bool:
        """Whether ``cmd`` can be sent without waiting for the spare to read it."""
        size = len(os.fsencode(cmd)) + 16
        return size <= MAX_CMD_BYTES and self.cmd_w >= 0 and size <= pipe_room(self.cmd_w)

    def close_pipes(self) -> None:
        for name in ("pipe_r", "cmd_w"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                with contextlib.suppress(OSError):
                    os.close(fd)
