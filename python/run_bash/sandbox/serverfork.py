"""The sandbox launcher's fork server as a fork of the host (``launcher.py`` talks to it).

The host forks it first thing (``begin_early``), right after the keeper, while it has one thread
and has imported little: after a fork, each page the two processes still share is copied at the
first write to it, and a host that goes on importing writes to most of its pages (reference
counts), so every page the host had before the fork costs it a fault later (here about 1,300
pages, 5-10 ms of a host's start, for each fork made late). The fork server imports what it serves
with itself, on the other core, while the host imports its own. ``Launcher`` takes the forked
server over when it is first used (``take_early``); one started later (the first one died) is a
Python of its own.

Kept small for that reason: nothing here imports more than the standard library's basics.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import time

# The largest request the host sends the fork server (its socket's buffer is made that large).
MAX_REQUEST_BYTES = 4 * 1024 * 1024
# Signals the host handles itself and the forked fork server leaves to their default action.
CHILD_DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Forked:
    """A fork server forked from the host (``fork_server``): what ``Launcher`` uses of a
    ``subprocess.Popen``. Signals go through a pidfd, so a pid reused after the fork server was
    reaped (by the host's look for stray children) is never signalled."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._pidfd = os.pidfd_open(pid)
        except OSError:
            self._pidfd = -1

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: it has exited
                self._ended(-int(signal.SIGKILL))
            else:
                if pid:
                    self._ended(os.waitstatus_to_exitcode(status))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                import subprocess

                raise subprocess.TimeoutExpired(["fork server"], timeout or 0)
            if self._pidfd >= 0:
                select.select([self._pidfd], [], [], left)
            else:
                time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None and self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _ended(self, code: int) -> None:
        self.returncode = code
        if self._pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = -1


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """(the host's end, the fork server's end) of a new control socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    with contextlib.suppress(OSError):
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_REQUEST_BYTES)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, MAX_REQUEST_BYTES)
    return ours, theirs


def fork_server(ours: socket.socket, theirs: socket.socket, sandlock: bool = True) -> Forked:
    """Fork this (single-threaded) process into the fork server. The child is made what a
    fork server started as its own Python is: its own session, /dev/null on fds 0-2 (the RPC
    channel and the log are the host's), no other descriptor but its control socket (and, until
    it has imported what it serves with, the host's kept modules: ``modcache``), default signal
    handling and the same bare environment; then it serves and never returns. Raises OSError."""
    host = os.getpid()
    # The host's handlers of these (``start.py``: SIGTERM raises SystemExit) must never run in the
    # child: one arriving before the child has made them the default (the keeper stops what a
    # host that failed to start leaves) would print a traceback on the host's stderr, where Lua
    # reads why the host did not start. Blocked across the fork; the child lets them in once they
    # are the default and its stderr is /dev/null.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, CHILD_DEFAULT_SIGNALS)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        raise
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return Forked(pid)
    try:  # the child
        ctl = theirs.detach()
        ours.close()
        logging = sys.modules.get("logging")  # (not imported: nothing logs yet)
        if logging is not None:
            for name in ("run_bash", "asyncio"):  # the host's log
                logger = logging.getLogger(name)
                for h in logger.handlers[:]:
                    logger.removeHandler(h)
                    h.close()
        for sig in CHILD_DEFAULT_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        kept = {ctl}
        modcache = sys.modules.get("run_bash.modcache")
        finder = getattr(modcache, "_finder", None)
        if finder is not None:
            kept.add(finder.fd)  # (closed once the fork server has imported: ``serve``)
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2 and int(name) not in kept:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        path_var = os.environ.get("PATH", "")  # the host's: its programs are listed for it
        os.environ.clear()
        os.environ.update({"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        gc.disable()  # (``serve`` freezes what is loaded and turns collection on)
        from run_bash.sandbox.forkserver import serve

        serve(ctl, host, census=path_var, sandlock=sandlock)
    finally:
        os._exit(1)


# The fork server ``begin_early`` forked: (it, the host's end of its socket, the host's pid).
_early: tuple[Forked, socket.socket, int] | None = None


def begin_early(sandlock: bool = True) -> int | None:
    """Fork the fork server now (the host's start: see the module docstring), without waiting
    for it; ``Launcher`` takes it over (``take_early``). Its pid; None when it was not forked."""
    global _early
    ours, theirs = socket_pair()
    try:
        forked = fork_server(ours, theirs, sandlock)
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    _early = (forked, ours, os.getpid())
    return forked.pid


def take_early() -> tuple[Forked, socket.socket, int] | None:
    """The fork server ``begin_early`` forked, once (the caller checks it was forked by this
    process: one inherited across a fork is not its own)."""
    global _early
    early, _early = _early, None
    return early
