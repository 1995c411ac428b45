"""The sandbox launcher's fork server and the run child each request becomes (``launcher.py``
describes the whole: why a fork server, its processes, their lifetimes). This module is what runs
inside the fork server; the host's side is ``launcher.Launcher``. The fork server imports it (and
sandlock) once; nothing here runs in the host."""

from __future__ import annotations

import array
import contextlib
import gc
import json
import os
import pickle
import select
import signal
import socket
import time
from collections.abc import Sequence
from typing import Any

from run_bash.sandbox.cgroups import SpareCgroup, cap_memory, enter_new
from run_bash.sandbox.loopback import connect_loopback
from run_bash.sandbox.namespaces import (
    check_rc,
    enter_namespaces,
    join_netns,
    libc,
    make_netns,
)
from run_bash.sandbox.serverfork import MAX_REQUEST_BYTES
from run_bash.sandbox.tempfs import is_full

Req = dict[str, Any]  # a request to the launcher
MAX_FDS = 8
# The largest head start of the host's first policy (``_send_census``) sent; a larger one is not.
MAX_CENSUS_BYTES = 192 * 1024
SPAWN_TIMEOUT_S = 30.0
# After the confined process exited, how long its status may take to arrive.
STATUS_TIMEOUT_S = 10.0
# Spare children of the fork server waiting for a request at a time (``serve``).
SPARE_CHILDREN = 2
# After its status, how long the run process may take to exit.
EXIT_WAIT_S = 0.1
PR_SET_PDEATHSIG = 1


def receive(chan: socket.socket, timeout: float | None) -> tuple[dict[str, Any] | None, list[int]]:
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
        if "facts" in req:  # sandlock's facts, where this fork server did not load it
            stage = "loading sandlock"
            _send(chan, {"facts": sandlock_facts()})
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
        if not req.get("probe"):
            # Before the run's mount namespace, which may hide where it is installed (loaded
            # already, unless this fork server was started without it: ``serve``).
            stage = "loading sandlock"
            import sandlock  # noqa: F401
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
        stage = "refusing hard links"
        # (Imported by ``serve``: the run's mount namespace may hide run_bash's own directory.)
        from run_bash.sandbox.seccomp import install, links_program

        links = links_program()
        if links is not None:  # hard links fail with EXDEV, as under bubblewrap (seccomp.LINKS)
            install(links)
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


def _probe_namespace() -> str:
    """Build a run's mount namespace in a child, running nothing: "" when it works, else why
    not (the host's backend check reads it from the ready message)."""
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="run_bash-probe-")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
                req = {"tmp": tmp, "mount_ns": True, "probe": True}
                run_child(req, [theirs.detach(), devnull, devnull], devnull, SpareCgroup())
            finally:
                os._exit(1)
        theirs.close()
        try:
            msg, _fds = receive(ours, SPAWN_TIMEOUT_S)
        except (OSError, ValueError) as e:
            return f"no answer ({e})"
        if msg is None:
            return "the probe ended before it answered"
        return str(msg.get("error") or "")
    finally:  # (the child is reaped by the kernel: SIGCHLD is ignored here)
        ours.close()
        theirs.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _census_child(ctl: socket.socket, path_var: str) -> int | None:
    """``_send_census`` in a child of its own that runs only on a CPU nothing else wants
    (``SCHED_IDLE``): it never slows the host's start, which it is for, nor delays this fork
    server's spares. Forked before this fork server loads sandlock (which takes this core for
    as long as the host needs to reach its first policy), it makes the census at once and
    sends it once told to (after ``ready``, which it must follow on the socket): the write end
    of that pipe is returned (one byte: send; closed without one: this fork server did not
    start, and nothing is sent). None when there is no child. Best effort (the host reads the
    directories itself when it is late)."""
    try:
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(go_r)
        os.close(go_w)
        return None
    if pid:
        os.close(go_r)
        return go_w  # (the child is reaped by the kernel: SIGCHLD is ignored here)
    try:
        os.close(go_w)
        gc.disable()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        _send_census(ctl, path_var, go_r)
    finally:
        os._exit(0)


def _send_census(ctl: socket.socket, path_var: str, go: int) -> None:
    """What the host's first policy reads of its ``PATH``, made here on the other core while
    the host starts (``headstart.make``) and sent after ``ready`` (once ``go`` gives a byte)
    as ``{"census": data}`` with the inotify instance that watches the programs
    (``{"census": null}`` when it cannot be made, or is larger than ``MAX_CENSUS_BYTES``).
    The host takes it at its first look (``headstart.take``)."""
    msg: dict[str, Any] = {"census": None}
    fds: list[int] = []
    try:
        from run_bash.sandbox import headstart

        data, fds = headstart.make(path_var)
        if len(json.dumps(data)) <= MAX_CENSUS_BYTES:
            msg["census"] = data
    except Exception:
        pass
    try:
        if os.read(go, 1) == b"1":
            _send(ctl, msg, fds if msg["census"] is not None else ())
    except OSError:
        pass
    finally:
        for fd in fds:
            os.close(fd)


def _import_failure(e: BaseException) -> str:
    if isinstance(e, ImportError) and e.name == "sandlock":
        return f"the sandlock Python package is not installed ({e})"
    return f"cannot import sandlock: {e}"


def sandlock_facts() -> dict[str, Any]:
    """What the host's check of the sandlock backend needs: sandlock's ``version``, the kernel's
    Landlock ``abi`` (or the ``error`` loading the library gave) and ``namespace`` ("" when a
    run's mount namespace can be built, else why not). Imports sandlock (where it is not yet)."""
    try:
        import sandlock
    except Exception as e:
        return {"version": "?", "error": _import_failure(e)}
    facts: dict[str, Any] = {"version": str(getattr(sandlock, "__version__", "?"))}
    try:
        facts["abi"] = int(sandlock.landlock_abi_version())
    except Exception as e:  # the native library failed to load
        facts["error"] = _describe(e)
    else:
        facts["namespace"] = _probe_namespace()
    return facts


def serve(ctl_fd: int, host: int, census: str | None = None, sandlock: bool = True) -> None:
    """The fork server: one request per message on ``ctl_fd``, taken by a spare child that
    becomes its run.

    Single-threaded by design (the runs unshare a user namespace). Exits when the host dies
    (SIGHUP as its parent-death signal, checked against the host's pid) or closes the socket.
    ``census``: the host's ``PATH``, whose programs are listed for it once ``ready`` is sent
    (``_send_census``). ``sandlock``: load sandlock now and say what it is (``sandlock_facts``)
    with ``ready``; else (the options named bubblewrap) it is not loaded, which leaves the CPU to
    the host's start (about 9 ms sooner under bubblewrap here), and ``ready`` says its facts are
    ``deferred``: a ``facts`` request answers them (a run child loads it), and a sandlock run's
    child loads it itself, before its namespace.
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
    # The census first: its child lists PATH while this process loads sandlock.
    go = _census_child(ctl, census) if census is not None else None
    try:
        import ctypes  # noqa: F401 (seccomp.install, in a run whose namespace may hide it)
        import ipaddress  # noqa: F401 (loopback.is_local: every connect a run's gate checks)

        if sandlock:
            import sandlock as _sdk  # noqa: F401 (imported once here, not in every run)

        import run_bash.sandbox.capabilities
        import run_bash.sandbox.loopback  # noqa: F401
        from run_bash.sandbox import seccomp

        seccomp.links_program()  # built once, here
        from run_bash.sandbox.cgroups import CGROUPS, host_dir
    except Exception as e:
        ctl.send(json.dumps({"error": _import_failure(e)}).encode())
        os._exit(1)
    # What the host's backend check needs (``sandlock_facts``), learnt here where sandlock is
    # loaded anyway: the host itself never imports it. Not loaded: asked for when needed.
    facts: dict[str, Any] = sandlock_facts() if sandlock else {"deferred": True}
    place = CGROUPS.places().get("memory")
    # Cgroups of spares that answered something other than a run (their process exits after
    # it): removed once empty.
    unused: list[str] = []
    # Objects that exist now are never collected: a run's child then copies fewer pages of
    # the fork server's memory (a collection would touch every object it tracks).
    gc.freeze()
    gc.enable()  # off while the fork server started (``serverfork``, ``Launcher._spawn``)
    global _QUERIES
    queries, _QUERIES = socket.socketpair(
        socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC
    )
    ctl.send(
        json.dumps({"ready": os.getpid(), "sandlock": facts, "census": go is not None}).encode()
    )
    if go is not None:  # the census may follow now
        with contextlib.suppress(OSError):
            os.write(go, b"1")
        os.close(go)
    # A fork server forked at the host's start kept the host's kept modules open for its own
    # imports and its census child's (``serverfork``): no run child gets that descriptor.
    from run_bash import modcache

    modcache.done()
    me = os.getpid()
    # Spare children wait for the next request themselves, so a request wakes one process (the
    # kernel wakes one reader of the socket per message), and the fork happens while nothing
    # waits for it. Two wait at a time: a request that is not a run (the namespace probe, a
    # project's network namespace, a forwarded connection) takes one, and a run that comes
    # right after it finds the other ready instead of waiting for a new child to enter its
    # cgroup. A new one is forked as soon as one has taken its request.
    waiting: dict[int, int] = {}  # read end of a spare's "taken" pipe -> its pid
    while True:
        while len(waiting) < SPARE_CHILDREN:
            r, w = os.pipe2(os.O_CLOEXEC)
            try:
                pid = os.fork()
            except OSError:
                os._exit(1)
            if pid == 0:
                gc.disable()  # short-lived, and every collection would copy pages
                try:
                    for other in (r, *waiting):
                        os.close(other)
                    queries.close()
                    spare(ctl, w, me, SpareCgroup(place, host))
                finally:
                    os._exit(1)
            os.close(w)
            waiting[r] = pid
        watched: list[int | socket.socket] = [*waiting, queries]
        unused = [d for d in unused if not _removed(d)]
        try:
            ready, _, _ = select.select(watched, [], [], 1.0 if unused else None)
        except OSError:
            ready = [next(iter(waiting))]  # wait for one spare's word, as the read below does
        if queries in ready:
            _answer(queries, host)
        died = False
        for r in [fd for fd in ready if isinstance(fd, int)]:
            said = b""
            with contextlib.suppress(OSError):
                said = os.read(r, 1)
            os.close(r)
            pid = waiting.pop(r)
            if said == b"e":
                os._exit(0)  # the host closed its end
            if said == b"o" and place is not None:
                with contextlib.suppress(OSError):
                    unused.append(os.path.join(host_dir(place, host), f"spare-{pid}"))
            died = died or said not in (b"t", b"o")
        if died:
            time.sleep(0.05)  # a spare died before taking anything: do not spin


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
