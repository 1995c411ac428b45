"""The namespace launcher: sandlock runs start in their own mount namespace, from a fork server.

Why: a mount namespace gives a sandlock run what Landlock alone cannot: a private ``/tmp``,
``/var/tmp`` and ``/dev/shm`` (the run's temp space, a size-limited tmpfs, bound on them),
read-only binds of the existing protected project files, and each ``.git`` directory bound onto
itself (a mount point cannot be renamed, removed or replaced). With no outside network configured,
the run also joins its project's loopback-only network namespace (``netholder.py``).
``unshare(CLONE_NEWUSER)`` and ``setns(CLONE_NEWUSER)`` need a single-threaded caller and the host
is not one (pynvim, sandlock supervisors, guards), so the host starts one single-threaded **fork
server** (``serve``) and asks it for each run; exec'ing a launcher per run would cost 80-110 ms
of Python start-up and imports, a fork costs a few.

Processes::

    host (subreaper) ── fork server ── run (one per command: sandlock's supervisor) ── bash -c CMD
                                   └── spare (waits for the next request)

The fork server keeps one spare child blocked on the request socket, so a request wakes one process
and the fork is already done; once the spare has taken a request, the server forks the next one.
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

Failures before the command runs come back as one ``{"error": …}`` message (the host raises
``SpawnError``); nothing runs unconfined.
"""

from __future__ import annotations

import array
import contextlib
import gc
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
import time
from collections.abc import Sequence
from typing import Any

from run_bash.errors import SpawnError
from run_bash.sandbox.cgroups import SpareCgroup, cap_memory, enter_new
from run_bash.sandbox.loopback import connect_loopback
from run_bash.sandbox.namespaces import (
    check_rc,
    enter_namespaces,
    join_netns,
    libc,
    make_netns,
)
from run_bash.sandbox.spare import lift
from run_bash.sandbox.tempfs import is_full

Req = dict[str, Any]  # a request to the launcher
MAX_REQUEST_BYTES = 4 * 1024 * 1024
MAX_FDS = 8
START_TIMEOUT_S = 30.0
SPAWN_TIMEOUT_S = 30.0
# After the confined process exited, how long its status may take to arrive.
STATUS_TIMEOUT_S = 10.0
# After its status, how long the run process may take to exit.
EXIT_WAIT_S = 0.1
PR_SET_PDEATHSIG = 1


# -- the run child (inside the fork server) ---------------------------------------------------------


def _send(chan: socket.socket, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
    data = json.dumps(msg).encode()
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    chan.sendmsg([data], anc, socket.MSG_NOSIGNAL)


def _exit_status(res: Any) -> int:
    sig = int(getattr(res, "signal", -1) or -1)
    code = int(res.exit_code)
    if sig > 0:
        return -sig
    if code >= 0:
        return code
    # KILLED / TIMEOUT: sandlock reports no number; the kernel's verdict is SIGKILL.
    return -int(signal.SIGKILL)


def _diagnose(kwargs: dict[str, Any], devnull: int) -> str:
    """Run ``true`` in the same sandbox with stderr captured, to learn why popen failed."""
    from sandlock import Sandbox

    r, w = os.pipe2(os.O_CLOEXEC)
    os.dup2(w, 2)
    os.close(w)
    try:
        with contextlib.suppress(Exception):
            Sandbox(**kwargs).popen(["/bin/true"]).wait()
    finally:
        os.dup2(devnull, 2)
    try:
        os.set_blocking(r, False)
        text = os.read(r, 4096).decode(errors="replace")
    except OSError:
        text = ""
    finally:
        os.close(r)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _describe(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text.splitlines()[0][:300] if text else type(err).__name__


def run_child(req: dict[str, Any], fds: list[int], devnull: int, spare_cg: SpareCgroup) -> None:
    """The body of one run, in a child of the fork server (a spare that took the request);
    never returns.

    ``fds``: the run's channel, its stdout and stderr, then (optionally) the project's network
    namespace's user and network namespace descriptors, then (with ``stdin`` in the request) the
    command's stdin (a prepared sandbox's command pipe, ``spare.py``; else /dev/null).
    ``spare_cg``: the cgroup the spare moved into while it waited (``SpareCgroup``).
    """
    chan = socket.socket(fileno=fds[0])
    stage = "setting up the run"
    marks = {"launcher": time.monotonic()}
    kwargs: dict[str, Any] = {}
    cgroups: dict[str, int] = {}
    stdin = fds.pop() if req.get("stdin") and len(fds) > 3 else devnull
    try:
        if "netns" in req:  # a new loopback-only network namespace (netholder.py)
            stage = "creating a network namespace"
            ns = make_netns()
            _send(chan, {"netns": "ok"}, ns)
            os._exit(0)
        if "diag" in req:  # a socket listing the listeners of a project's namespace
            stage = "listing listeners"
            join_netns(fds[3:5])
            from run_bash.sandbox.loopback import diag_socket

            nl = diag_socket()
            _send(chan, {"diag": 1}, [nl.fileno()])
            os._exit(0)
        if "connect" in req:  # a connection into a project's network namespace (forward.py)
            stage = "connecting"
            join_netns(fds[3:5])
            sock = connect_loopback(int(req["connect"]))
            _send(chan, {"connected": int(req["connect"])}, [sock.fileno()])
            os._exit(0)
        stage = "capping the run's memory"
        cgroups = cap_memory(int(req.get("memory_cap") or 0), spare_cg)
        out, err = fds[1], fds[2]
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in {out, err, stdin} - {devnull}:
            if fd > 2:
                os.close(fd)
        netns = fds[3:5]
        temp = -1
        if req.get("mount_ns", True):
            stage = "building the run's namespace"
            temp = enter_namespaces(req, netns)
            marks["namespace"] = time.monotonic()
        for fd in netns:
            os.close(fd)
        if req.get("probe"):
            _send(chan, {"probe": "ok"})
            os._exit(0)
        import resource

        from sandlock import Protection, Sandbox

        size = int(req["max_file_size"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        kwargs = dict(req["sandbox"])
        if "allow_degraded" in kwargs:
            kwargs["allow_degraded"] = [Protection[n] for n in kwargs["allow_degraded"]]
        gate = req.get("gate")
        stage = "building the sandbox"
        if gate is not None:
            from run_bash.sandbox.loopback import LoopbackGate

            sandbox = Sandbox(**kwargs, policy_fn=LoopbackGate(**gate, ask=_ask_owned))
        else:
            sandbox = Sandbox(**kwargs)
        marks["sandbox"] = time.monotonic()
        stage = "starting the command"
        proc = sandbox.popen(req["argv"])
        marks["popen"] = time.monotonic()
    except BaseException as e:  # reported to the host; nothing else may run
        why = _describe(e)
        if stage == "starting the command":
            with contextlib.suppress(BaseException):
                why = _diagnose(kwargs, devnull) or why
        with contextlib.suppress(BaseException):
            _send(chan, {"error": f"{stage}: {why}", "stage": stage, "cgroups": cgroups})
        os._exit(1)
    try:
        pidfd = os.pidfd_open(proc.pid)
        # The output pipe belongs to the command now: EOF must come when it is done with it (and
        # a prepared sandbox's command pipe is the command's to read).
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        # This process is sandlock's supervisor from here on (the confined root's parent).
        msg = {"pid": proc.pid, "supervisor": os.getpid(), "cgroups": cgroups, "marks": marks}
        _send(chan, msg, [pidfd])
    except BaseException:  # the host gave up on this run: it must not go on unobserved
        with contextlib.suppress(BaseException):
            proc.kill()
            proc.wait()
        os._exit(1)
    status = -int(signal.SIGKILL)
    try:
        # The root is this process's child: the kernel's word on its exit, read without reaping
        # it, goes to the host at once; sandlock's own wait (its clean-up, a few ms) follows.
        seen = _exited(pidfd)
        status = _exit_status(proc.wait()) if seen is None else seen
    finally:
        with contextlib.suppress(BaseException):
            _send(chan, {"status": status, "temp_full": temp >= 0 and is_full(temp)})
    with contextlib.suppress(BaseException):
        proc.wait()
    os._exit(0)


def _exited(pidfd: int) -> int | None:
    """Wait for the exit of this process's child ``pidfd`` without reaping it: its status (>= 0)
    or ``-signal``; None when the kernel cannot say (it was reaped already)."""
    try:
        info = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOWAIT)
    except OSError:
        return None
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return info.si_status
    if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return -info.si_status
    return None


# -- the fork server ---------------------------------------------------------------------------------

# The runs' end of the fork server's query socket (``_ask_owned``); set in ``serve``.
_QUERIES: socket.socket | None = None
QUERY_TIMEOUT_S = 2.0


def _ask_owned(port: int) -> set[int]:
    """Ask the fork server which listening sockets on ``port`` run_bash's sessions hold (it can
    read every run's fds; a run in a user namespace of its own cannot read another's)."""
    if _QUERIES is None:
        return set()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        with ours:
            _send(_QUERIES, {"owned": port}, [theirs.fileno()])
            theirs.close()
            ours.settimeout(QUERY_TIMEOUT_S)
            msg = json.loads(ours.recv(65536) or b"{}")
        held = msg.get("held") if isinstance(msg, dict) else None
        return {int(i) for i in held} if isinstance(held, list) else set()
    except (OSError, ValueError, TypeError):
        return set()
    finally:
        theirs.close()


def _answer(queries: socket.socket, host: int) -> None:
    """Answer one query of a run (``_ask_owned``) on the socket it sent along."""
    from run_bash.sandbox.loopback import owned_inodes

    try:
        msg, anc, _flags, _addr = queries.recvmsg(
            4096, socket.CMSG_SPACE(array.array("i").itemsize), socket.MSG_CMSG_CLOEXEC
        )
    except OSError:
        return
    fds = _fds_of(anc)
    try:
        req = json.loads(msg)
        port = int(req["owned"])
        held = sorted(owned_inodes(port, host)) if 0 < port < 65536 else []
        if fds:
            with socket.socket(fileno=fds.pop(0)) as reply:
                reply.setblocking(False)
                reply.send(json.dumps({"held": held}).encode())
    except (OSError, ValueError, KeyError, TypeError):
        pass
    finally:
        for fd in fds:
            os.close(fd)


def _fds_of(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            arr = array.array("i")
            arr.frombytes(data[: len(data) - (len(data) % arr.itemsize)])
            fds.extend(arr)
    return fds


def serve(ctl_fd: int, host: int) -> None:
    """The fork server: one request per message on ``ctl_fd``, taken by a spare child that
    becomes its run.

    Single-threaded by design (the runs unshare a user namespace). Exits when the host dies
    (SIGHUP as its parent-death signal, checked against the host's pid) or closes the socket.
    """
    ctl = socket.socket(fileno=ctl_fd)

    def parent_gone(_signum: int, _frame: object) -> None:
        # Also sent when the host *thread* that started us exits: only a new parent means the
        # host is gone.
        if os.getppid() != host:
            os._exit(0)

    signal.signal(signal.SIGHUP, parent_gone)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # runs are reaped by the kernel
    check_rc(libc.prctl(PR_SET_PDEATHSIG, signal.SIGHUP, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != host:
        os._exit(0)
    try:
        import sandlock  # noqa: F401  (imported once here, not in every run)

        import run_bash.sandbox.capabilities
        import run_bash.sandbox.loopback  # noqa: F401
        from run_bash.sandbox.cgroups import CGROUPS, host_dir
    except Exception as e:
        ctl.send(json.dumps({"error": f"cannot import sandlock: {e}"}).encode())
        os._exit(1)
    place = CGROUPS.places().get("memory")
    # Cgroups of spares that answered something other than a run (their process exits after
    # it): removed once empty.
    unused: list[str] = []
    # Objects that exist now are never collected: a run's child then copies fewer pages of
    # the fork server's memory (a collection would touch every object it tracks).
    gc.freeze()
    gc.enable()  # off while the fork server started (``Launcher._spawn``)
    global _QUERIES
    queries, _QUERIES = socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
    )
    ctl.send(json.dumps({"ready": os.getpid()}).encode())
    me = os.getpid()
    # A spare child waits for the next request itself, so a request wakes one process, not
    # two, and the fork happens while nothing waits for it. Only one process reads the socket
    # at a time: the next spare is forked once the current one has taken its request.
    while True:
        r, w = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError:
            os._exit(1)
        if pid == 0:
            gc.disable()  # short-lived, and every collection would copy pages
            try:
                os.close(r)
                queries.close()
                spare(ctl, w, me, SpareCgroup(place, host))
            finally:
                os._exit(1)
        os.close(w)
        said = b""
        while True:
            watched: list[int | socket.socket] = [r, queries]
            unused = [d for d in unused if not _removed(d)]
            try:
                ready, _, _ = select.select(watched, [], [], 1.0 if unused else None)
            except OSError:
                ready = [r]
            if queries in ready:
                _answer(queries, host)
            if r in ready:
                with contextlib.suppress(OSError):
                    said = os.read(r, 1)
                break
        os.close(r)
        if said == b"e":
            os._exit(0)  # the host closed its end
        if said == b"o" and place is not None:
            with contextlib.suppress(OSError):
                unused.append(os.path.join(host_dir(place, host), f"spare-{pid}"))
        if said not in (b"t", b"o"):
            time.sleep(0.05)  # the spare died before taking anything: do not spin


def _removed(cgroup: str) -> bool:
    """Try to remove an unused cgroup; True once it is gone (False while a process is in it)."""
    try:
        os.rmdir(cgroup)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def spare(ctl: socket.socket, taken: int, server: int, spare_cg: SpareCgroup) -> None:
    """A child of the fork server that takes the next request and becomes its run (or answers
    it); never returns. While it waits it moves into a cgroup of its own, which becomes its run's
    (``spare_cg``). Writes ``t`` to ``taken`` once it has a run, ``o`` for any other request
    (its cgroup is then the fork server's to remove), ``e`` at EOF."""
    for sig in (signal.SIGCHLD, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    check_rc(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != server:
        os._exit(1)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    if spare_cg.place is not None:
        with contextlib.suppress(OSError):  # else a run makes its cgroup when it starts
            spare_cg.path = enter_new(spare_cg.place, spare_cg.host, f"spare-{os.getpid()}")
    while True:
        try:
            msg, anc, flags, _addr = ctl.recvmsg(
                MAX_REQUEST_BYTES,
                socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize),
                socket.MSG_CMSG_CLOEXEC,
            )
        except OSError:
            msg, anc, flags = b"", [], 0
        if not msg:
            os.write(taken, b"e")
            os._exit(0)
        fds = _fds_of(anc)
        if fds:
            break
    ctl.close()
    try:
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            raise ValueError("request too large")
        req = pickle.loads(msg)
        if not isinstance(req, dict):
            raise ValueError("not a request")
    except Exception as e:
        os.write(taken, b"o")
        with contextlib.suppress(OSError):
            _send(socket.socket(fileno=fds[0]), {"error": f"fork server: {e}"})
        os._exit(1)
    os.write(taken, b"t" if "argv" in req else b"o")
    os.close(taken)
    run_child(req, fds, devnull, spare_cg)


# -- the host's side ----------------------------------------------------------------------------------


def _release_cgroups(cgroups: object) -> None:
    """Remove the cgroups of a run that failed to start (its launcher process is exiting)."""
    if not isinstance(cgroups, dict) or not cgroups:
        return
    from run_bash.sandbox.cgroups import CGROUPS, RunCgroup

    CGROUPS.release(RunCgroup("", {str(d): int(v) for d, v in cgroups.items()}))


def _recv(chan: socket.socket, timeout: float | None) -> tuple[dict[str, Any] | None, list[int]]:
    """One message from a run's channel: (message, received fds); (None, []) at EOF."""
    chan.settimeout(timeout)
    data, anc, _flags, _addr = chan.recvmsg(
        65536, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC
    )
    fds = _fds_of(anc)
    if not data:
        return None, fds
    msg = json.loads(data)
    if not isinstance(msg, dict):
        raise ValueError(f"bad message from the launcher: {data[:100]!r}")
    return msg, fds


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
            msg, fds = _recv(self.chan, timeout)
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


class Launcher:
    """The host's fork server: started on first use, restarted when it died."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._owner = -1
        # Started by ``begin`` and not yet heard from: (process, our end of its socket, the
        # pid that started it).
        self._begun: tuple[subprocess.Popen[bytes], socket.socket, int] | None = None
        self._runs = 0  # runs started through this process's fork servers

    @property
    def pid(self) -> int | None:
        """The fork server's pid while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def begin(self) -> None:
        """Start the fork server without waiting for it to say it is ready: the host does this
        first thing, so the fork server comes up (a Python of its own) while the host imports;
        ``ensure`` waits for it. Raises SpawnError when it cannot be started."""
        with self._lock:
            if self._begun is None and not self._alive():
                self._begun = (*self._spawn(), os.getpid())

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

    def _take_begun(self) -> tuple[subprocess.Popen[bytes], socket.socket] | None:
        """The fork server ``begin`` started, if this process started it (one inherited across
        a fork is not ours)."""
        begun, self._begun = self._begun, None
        if begun is None or begun[2] != os.getpid():
            return None
        return begun[0], begun[1]

    def _start(self) -> None:
        begun = self._take_begun()
        proc, ours = begun if begun is not None else self._spawn()
        self._await(proc, ours)

    def _spawn(self) -> tuple[subprocess.Popen[bytes], socket.socket]:
        """Start the fork server's process: (it, our end of its control socket)."""
        ours, theirs = socket.socketpair(
            socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
        )
        with contextlib.suppress(OSError):
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_REQUEST_BYTES)
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, MAX_REQUEST_BYTES)
        # The host's own import path: the fork server imports the same run_bash and sandlock.
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = [package, *(p for p in sys.path if p and p != package)]
        code = (
            # No garbage collection while it imports (``serve`` freezes what it loaded).
            f"import gc; gc.disable(); import sys; sys.path[:0] = {path!r}; "
            "from run_bash.sandbox.launcher import serve; "
            f"serve({theirs.fileno()}, {os.getpid()})"
        )
        try:
            proc = subprocess.Popen(
                [sys.executable, "-E", "-c", code],
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

    def _await(self, proc: subprocess.Popen[bytes], ours: socket.socket) -> None:
        """Wait for the fork server ``_spawn`` started to say it is ready; raises SpawnError."""
        try:
            msg, _fds = _recv(ours, START_TIMEOUT_S)
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

    def _stop(self) -> None:
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
            msg, fds = _recv(ours, SPAWN_TIMEOUT_S)
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
