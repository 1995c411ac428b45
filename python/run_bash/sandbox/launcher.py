"""The namespace launcher: sandlock runs start in their own mount namespace, from a fork server.

Why: a mount namespace gives a sandlock run what Landlock alone cannot: a private ``/tmp``,
``/var/tmp`` and ``/dev/shm`` (the run's temp space, a size-limited tmpfs, bound on them),
read-only binds of the existing protected project files, and each ``.git`` directory bound onto
itself (a mount point cannot be renamed, removed or replaced). With no outside network configured,
the run also joins its project's loopback-only network namespace (``netholder.py``).
``unshare(CLONE_NEWUSER)`` and ``setns(CLONE_NEWUSER)`` need a single-threaded caller and the host
is not one (the loop's executor, sandlock supervisors, guards), so the host starts one
single-threaded **fork server** (``forkserver.serve``) and asks it for each run; exec'ing a
launcher per run would cost 80-110 ms of Python start-up and imports, a fork costs a few. The host
forks the fork server from itself first thing, while it still has one thread and has imported
little (``serverfork.begin_early``: no second interpreter to start, and few pages shared with
it); one started later (the first one died) is a Python of its own.

Processes::

    host (subreaper) ── fork server ── run (one per command: sandlock's supervisor) ── bash -c CMD
                                   └── spare (waits for the next request)

The fork server keeps two spare children blocked on the request socket, so a request wakes one
process and the fork is already done; once a spare has taken a request, the server forks the next
one (two, so that a run right after a request of another kind still finds one ready).
The spare becomes the run: it moves itself into the run's cgroups (``cgroups.py``), takes fds 0/1/2
= /dev/null and the run's output pipe; unshares a mount namespace (as a normal user inside a new
user namespace that maps the user's own uid and gid; with the project's network namespace, inside
the user namespace that owns it); makes every mount private; mounts the run's temp space (a tmpfs
of ``max_temp_size``, ``tempfs.py``) on its private dir, binds it on the three temp dirs and puts
back the granted paths that lie under them (a project under ``/tmp``); makes the request's binds in
order (Neovim's directories read-only, then ``Policy.protect_binds()``: ``.git`` directories onto
themselves, the existing members of the host-read set read-only); drops every capability (all of
it in ``namespaces.py``); sets ``RLIMIT_FSIZE``; then calls ``Sandbox.popen`` (sandlock's supervisor
runs in this child). It reports over its own channel (a socket pair the host created) the confined
process's pid with a pidfd of it, then its exit status and whether the temp space was full.

Lifetime: the fork server gets SIGHUP when the host dies and exits (and when its spare sees the
control socket's EOF); each spare and run is SIGKILLed when the fork server dies
(``PR_SET_PDEATHSIG``), and sandlock's confined process is SIGKILLed when its supervisor dies.
Escaped processes are reparented to the host (the nearest subreaper), which sweeps them as before;
when the host itself is gone, its keeper does.

A fork server forked at the host's start also has one child of its own read, at ``SCHED_IDLE``
and while the fork server itself loads sandlock, what the host's first policy reads of the host's
``PATH`` (``headstart.py``): it follows ``ready`` on the control socket as one ``{"census": …}``
message, which the host takes at its first look (``take_census``) or drops.

Failures before the command runs come back as one ``{"error": …}`` message (the host raises
``SpawnError``); nothing runs unconfined.
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

from run_bash.errors import SpawnError
from run_bash.sandbox.forkserver import (
    EXIT_WAIT_S,
    MAX_CENSUS_BYTES,
    MAX_FDS,
    SPAWN_TIMEOUT_S,
    STATUS_TIMEOUT_S,
    Req,
    _fds_of,
    receive,
)
from run_bash.sandbox.serverfork import (
    MAX_REQUEST_BYTES,
    Forked,
    socket_pair,
    take_early,
)
from run_bash.sandbox.spare import lift

START_TIMEOUT_S = 30.0
# How long the host's first policy waits for the fork server's census of PATH (``take_census``)
# when it is not there yet; then the policy makes its own. Not at all: it is made only on a CPU
# nothing else wants, and can be late by any amount on a busy machine.
CENSUS_WAIT_S = 0.0
__all__ = ["EXIT_WAIT_S", "STATUS_TIMEOUT_S", "Launcher", "Run", "launcher"]


# -- the host's side ----------------------------------------------------------------------------------


def _release_cgroups(cgroups: object) -> None:
    """Remove the cgroups of a run that failed to start (its launcher process is exiting)."""
    if not isinstance(cgroups, dict) or not cgroups:
        return
    from run_bash.sandbox.cgroups import CGROUPS, RunCgroup

    CGROUPS.release(RunCgroup("", {str(d): int(v) for d, v in cgroups.items()}))


class Run:
    """The host's handle on one started run: the confined root's pid, a pidfd of it, and the
    channel its exit status arrives on."""

    def __init__(self, chan: socket.socket, pid: int, pidfd: int) -> None:
        self.chan = chan
        self.pid = pid
        self.pidfd = pidfd
        self._status: int | None = None
        self.reported = False  # the status came; the run process exits right after (settle)
        # The run process (sandlock's supervisor, outside the confinement), 0 when unknown.
        self.supervisor = 0
        # Whether the run's temp space was full when its command ended.
        self.temp_full = False
        # The run's memory cgroups (directory -> cgroup version), made by the launcher.
        self.cgroups: dict[str, int] = {}
        # When the run process reached each stage of its start (``time.monotonic()``).
        self.marks: dict[str, float] = {}

    def wait(self, timeout: float | None = None) -> int:
        """The root's exit status (>= 0) or ``-signal``; ``-SIGKILL`` when the run's supervisor
        ended without saying (it was killed)."""
        if self._status is not None:
            return self._status
        status = -int(signal.SIGKILL)
        try:
            msg, fds = receive(self.chan, timeout)
            for fd in fds:
                os.close(fd)
            value = msg.get("status") if msg else None
            if isinstance(value, int) and not isinstance(value, bool):
                status = value
            self.temp_full = bool(msg and msg.get("temp_full") is True)
            self.reported = msg is not None
        except (OSError, ValueError):
            pass
        self._status = status
        return status

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.chan.close()
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = -1


def _readable(sock: socket.socket, timeout: float) -> bool:
    """Whether ``sock`` has something to read within ``timeout`` seconds."""
    try:
        return bool(select.select([sock], [], [], timeout)[0])
    except (OSError, ValueError):
        return False


ServerProcess = subprocess.Popen[bytes] | Forked


class Launcher:
    """The host's fork server: started on first use, restarted when it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: ServerProcess | None = None
        self._sock: socket.socket | None = None
        self._owner = -1
        # Forked at the host's start (``serverfork.begin_early``) and not yet heard from:
        # (process, our end of its socket, the pid that started it).
        self._begun: tuple[ServerProcess, socket.socket, int] | None = take_early()
        self._runs = 0  # runs started through this process's fork servers
        # What the fork server said of sandlock when it started (``sandlock_facts``).
        self._facts: dict[str, Any] = {}
        # The fork server said a census of PATH follows its ``ready`` (``take_census``), and it
        # has not been read yet; ``_census_wanted``: nobody asked for it yet.
        self._census_coming = False
        self._census_wanted = True

    @property
    def pid(self) -> int | None:
        """The fork server's pid while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def release_unused(self) -> None:
        """Stop the fork server when no run was ever started through it (a run dies with it):
        the host starts it early, guessing a confining backend, and its setup may find none.
        It starts again when something needs it."""
        with self._lock:
            begun = self._take_begun()
            if begun is not None:
                self._proc, self._sock, self._owner = begun[0], begun[1], os.getpid()
            if self._runs == 0 and self._owner == os.getpid():
                self._stop()

    def _take_begun(self) -> tuple[ServerProcess, socket.socket] | None:
        """The fork server forked at the host's start, if this process forked it (one inherited
        across a fork is not ours); also when this object was made before it was forked."""
        begun, self._begun = self._begun, None
        if begun is None:
            begun = take_early()
        if begun is None or begun[2] != os.getpid():
            return None
        return begun[0], begun[1]

    def _start(self) -> None:
        begun = self._take_begun()
        proc, ours = begun if begun is not None else self._spawn()
        self._await(proc, ours)

    def _spawn(self) -> tuple[ServerProcess, socket.socket]:
        """Start the fork server as a Python of its own (the one forked at the host's start,
        ``serverfork``, died, or there was none): (it, our end of its control socket)."""
        ours, theirs = socket_pair()
        # The host's own import path: the fork server imports the same run_bash and sandlock.
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = [package, *(p for p in sys.path if p and p != package)]
        code = (
            # No garbage collection while it imports (``serve`` freezes what it loaded).
            f"import gc; gc.disable(); import sys; sys.path[:0] = {path!r}; "
            "from run_bash.sandbox.forkserver import serve; "
            f"serve({theirs.fileno()}, {os.getpid()})"
        )
        try:
            # Isolated (-I: no PYTHON* variables, no user site, and no working directory on the
            # import path) and started in "/": nothing a run left in the project is imported.
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code],
                cwd="/",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                close_fds=True,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            )
        except OSError as e:
            ours.close()
            raise SpawnError(f"cannot start the sandbox launcher: {e}") from e
        finally:
            theirs.close()
        logging.getLogger("run_bash").info("sandbox launcher: fork server %d started", proc.pid)
        return proc, ours

    def _await(self, proc: ServerProcess, ours: socket.socket) -> None:
        """Wait for the fork server ``_spawn`` started to say it is ready; raises SpawnError."""
        try:
            msg, _fds = receive(ours, START_TIMEOUT_S)
        except (OSError, ValueError) as e:
            msg = {"error": f"no answer ({e})"}
        if not msg or "ready" not in msg:
            ours.close()
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            why = (msg or {}).get("error") or f"it exited ({proc.returncode})"
            raise SpawnError(f"the sandbox launcher did not start: {why}")
        self._proc, self._sock, self._owner = proc, ours, os.getpid()
        facts = msg.get("sandlock")
        self._facts = facts if isinstance(facts, dict) else {}
        self._census_coming = msg.get("census") is True

    def take_census(self) -> tuple[dict[str, Any], list[int]] | None:
        """What the fork server made for the host's first policy when it started
        (``forkserver._send_census``): (its data, its descriptors) for ``headstart.take``, which
        asks once. Waits for it up to ``CENSUS_WAIT_S`` when the fork server is ready and it is
        still being made; None when there is none (a fork server that is not ready by now is not
        waited for). One that comes later is dropped."""
        with self._lock:
            self._census_wanted = False
            begun = self._begun
            if begun is not None and begun[2] == os.getpid() and _readable(begun[1], 0):
                with contextlib.suppress(SpawnError):
                    self._start()  # its ``ready`` is there: read it
            return self._read_census(CENSUS_WAIT_S)

    def _read_census(self, timeout: float) -> tuple[dict[str, Any], list[int]] | None:
        """The census message, once (callers hold the lock); None when none came in ``timeout``
        (it is then dropped when it comes: ``_send``)."""
        sock = self._sock
        if not self._census_coming or sock is None or self._owner != os.getpid():
            return None
        if not _readable(sock, timeout):
            return None
        self._census_coming = False
        try:
            data, anc, _flags, _addr = sock.recvmsg(
                MAX_CENSUS_BYTES + 4096, socket.CMSG_SPACE(4 * MAX_FDS), socket.MSG_CMSG_CLOEXEC
            )
        except OSError:
            return None
        fds = _fds_of(anc)
        try:
            census = json.loads(data).get("census")
        except (ValueError, AttributeError):
            census = None
        if not isinstance(census, dict):
            for fd in fds:
                os.close(fd)
            return None
        return census, fds

    def sandlock_facts(self) -> dict[str, Any]:
        """What the fork server said of sandlock when it started (it imports sandlock; the host
        does not): ``version``, the kernel's Landlock ``abi`` (or the ``error`` loading the
        library gave) and ``namespace`` ("" when a run's mount namespace can be built, else why
        not). Starts the fork server if needed; raises SpawnError. A fork server that did not
        load sandlock (``serverfork.begin_early``) is asked for them once (a run child of it loads it)."""
        self.ensure()
        if self._facts.get("deferred"):
            with open(os.devnull, "wb") as null:
                chan, msg, fds = self.request({"facts": True}, null.fileno(), null.fileno())
            chan.close()
            for fd in fds:
                os.close(fd)
            facts = msg.get("facts")
            if not isinstance(facts, dict):
                raise SpawnError(f"the sandbox launcher answered {msg!r}")
            self._facts = facts
        return dict(self._facts)

    def _stop(self) -> None:
        self._census_coming = False
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(Exception):
                self._proc.wait(timeout=2)
        self._proc = self._sock = None

    def _alive(self) -> bool:
        return (
            self._proc is not None
            and self._owner == os.getpid()
            and self._proc.poll() is None
            and self._sock is not None
        )

    def ensure(self) -> int:
        """Start the fork server unless it runs; its pid. Raises SpawnError."""
        with self._lock:
            if not self._alive():
                if self._owner == os.getpid():
                    self._stop()
                else:  # inherited across a fork: not ours to stop
                    self._proc = self._sock = None
                self._start()
            assert self._proc is not None
            return self._proc.pid

    def _send(self, payload: bytes, fds: list[int]) -> None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        for attempt in range(2):
            self.ensure()
            with self._lock:
                if self._census_coming and not self._census_wanted:
                    late = self._read_census(0)  # asked for and not there then: dropped
                    for fd in late[1] if late is not None else ():
                        os.close(fd)
                sock = self._sock
                try:
                    assert sock is not None
                    sock.sendmsg([payload], anc, socket.MSG_NOSIGNAL)
                    return
                except (BrokenPipeError, ConnectionError, AssertionError) as e:
                    # Not received: the fork server is gone. Start a new one, once.
                    self._stop()
                    if attempt:
                        raise SpawnError(f"the sandbox launcher is not answering: {e}") from e

    def request(
        self, req: Req, stdout: int, stderr: int, netns: Sequence[int] = (), stdin: int = -1
    ) -> tuple[socket.socket, dict[str, Any], list[int]]:
        """Send one request; return the run's channel and its first message (with its fds)."""
        if stdin >= 0:
            req = {**req, "stdin": True}
        payload = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
        if len(payload) > MAX_REQUEST_BYTES:
            raise SpawnError("the sandbox policy is too large to send to the launcher")
        ours, theirs = socket.socketpair(
            socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
        )
        try:
            sent = [theirs.fileno(), stdout, stderr, *netns, *([stdin] if stdin >= 0 else [])]
            self._send(payload, sent)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        try:
            msg, fds = receive(ours, SPAWN_TIMEOUT_S)
        except TimeoutError as e:
            ours.close()  # a late report finds the channel closed and kills its command
            raise SpawnError(
                f"the sandbox launcher did not answer in {SPAWN_TIMEOUT_S:.0f} s"
            ) from e
        except (OSError, ValueError) as e:
            ours.close()
            raise SpawnError(f"the sandbox launcher failed: {e}") from e
        if msg is None:
            ours.close()
            raise SpawnError("the sandbox launcher stopped before the command started")
        if "error" in msg:
            ours.close()
            for fd in fds:
                os.close(fd)
            _release_cgroups(msg.get("cgroups"))
            raise SpawnError(str(msg["error"]))
        return ours, msg, fds

    def spawn(
        self, req: Req, stdout: int, stderr: int, netns: Sequence[int] = (), stdin: int = -1
    ) -> Run:
        """Start one run; raises SpawnError (nothing ran) when it could not be started.
        ``stdin``: the command's stdin (a prepared sandbox's command pipe; else /dev/null)."""
        self._runs += 1
        chan, msg, fds = self.request(req, stdout, stderr, netns, stdin)
        pid = msg.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or len(fds) != 1:
            chan.close()
            for fd in fds:
                os.close(fd)
            raise SpawnError(f"the sandbox launcher answered {msg!r}")
        chan.settimeout(None)
        if stdin >= 0:  # a prepared sandbox: its descriptors live across runs (spare.lift)
            chan = socket.socket(fileno=lift(chan.detach()))
            fds[0] = lift(fds[0])
        run = Run(chan, pid, fds[0])
        supervisor = msg.get("supervisor")
        if isinstance(supervisor, int) and not isinstance(supervisor, bool):
            run.supervisor = supervisor
        cgroups = msg.get("cgroups")
        if isinstance(cgroups, dict):
            run.cgroups = {str(d): int(v) for d, v in cgroups.items()}
        marks = msg.get("marks")
        if isinstance(marks, dict):
            run.marks = {str(k): float(v) for k, v in marks.items()}
        return run

    def _fds(self, req: dict[str, Any], count: int, netns: Sequence[int] = ()) -> list[int]:
        """Send a request that answers with ``count`` descriptors and nothing else (the run's
        output goes nowhere). Raises SpawnError."""
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            chan, _msg, fds = self.request(req, devnull, devnull, netns)
        finally:
            os.close(devnull)
        chan.close()
        if len(fds) != count:
            for fd in fds:
                os.close(fd)
            raise SpawnError(f"the sandbox launcher answered {req!r} with {len(fds)} descriptors")
        return fds

    def connect(self, port: int, netns: Sequence[int]) -> socket.socket:
        """A socket connected to ``port`` on the loopback of the network namespace ``netns``
        (``(user ns fd, net ns fd)``). Raises OSError."""
        try:
            fds = self._fds({"connect": port}, 1, netns)
        except SpawnError as e:
            raise ConnectionRefusedError(f"no connection to port {port}: {e}") from e
        sock = socket.socket(fileno=fds[0])
        sock.setblocking(True)  # the file was non-blocking in the connecting process
        return sock

    def diag(self, netns: Sequence[int]) -> socket.socket:
        """A ``NETLINK_SOCK_DIAG`` socket made in the network namespace ``netns`` (``(user ns
        fd, net ns fd)``). Raises OSError."""
        try:
            fds = self._fds({"diag": True}, 1, netns)
        except SpawnError as e:
            raise OSError(f"no listener socket: {e}") from e
        return socket.socket(fileno=fds[0])

    def netns(self) -> tuple[int, int]:
        """A new loopback-only network namespace: descriptors ``(user ns, net ns)``
        (``make_netns``). Raises SpawnError."""
        fds = self._fds({"netns": True}, 2)
        return fds[0], fds[1]

    def probe(self, req: dict[str, Any], netns: Sequence[int] = ()) -> str:
        """Build a run's namespace without running anything; "" when it works, else why not."""
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            chan, _msg, _fds = self.request({**req, "probe": True}, devnull, devnull, netns)
            chan.close()
            return ""
        except SpawnError as e:
            return str(e)
        finally:
            os.close(devnull)


_LAUNCHER = Launcher()


def launcher() -> Launcher:
    """This process's launcher (one fork server per host)."""
    return _LAUNCHER
