"""run_bash's own network namespaces: one loopback per project, shared by that project's runs.

With no outside network configured, runs of both confining backends join the network namespace of
their project: a server started by one run of the project (a background session) is reachable from
the project's next runs, of either backend, while the host's own services, the outside network and
**other projects' servers** are not: each namespace has nothing but its own ``lo``. A sandboxed
listener in it can never receive a connection meant for a service of the host.

The project of a run (``project_of``) is the top level of its git work tree as git reports it (the
policy's host-read roots), else its working directory: runs in subdirectories of one repository
share a loopback, runs in two repositories do not.

A namespace is made by a child of the sandbox launcher's fork server (``namespaces.make_netns``: a
user namespace mapping the user's own ids, a network namespace in it, ``lo`` brought up), which
sends descriptors of both namespaces and exits; this process keeps the namespace alive by holding
them. Bubblewrap runs join with ``nsenter`` (``Loopback.paths()``), sandlock runs through the
launcher, which receives the descriptors (``Loopback.fds``). Nothing but the kernel is needed: no
bwrap, no ``ip``.

Lifetime: each run holds its project's namespace (``Loopbacks.acquire``) until it has ended
(``release``). A namespace nothing holds is kept for the project's next run, at most
``MAX_IDLE`` of them (the least recently used go first); then its descriptors are closed and the
kernel frees it once no process is left in it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from run_bash.errors import SpawnError
from run_bash.paths import is_under

if TYPE_CHECKING:
    from run_bash.sandbox.policy import Policy

# Idle namespaces kept for their project's next run.
MAX_IDLE = 4


def project_of(policy: Policy) -> str:
    """The project a run belongs to: the outermost of the policy's project roots (its working
    directory and the work tree git reports for it) that holds the working directory."""
    cwd = os.path.realpath(policy.cwd)
    roots = policy.host_read.roots if policy.host_read is not None else ()
    tops = [r for r in (os.path.realpath(p) for p in roots) if is_under(cwd, r)]
    return min(tops, key=len) if tops else cwd


class Loopback:
    """One project's network namespace: descriptors ``(user ns, net ns)`` held by this process."""

    def __init__(self, key: str, fds: tuple[int, int], lock: threading.Lock) -> None:
        self.key = key
        self._fds: tuple[int, int] | None = fds
        self._lock = lock
        self.users: set[str] = set()
        self.idle_since = 0.0
        self._diag: socket.socket | None = None

    @property
    def fds(self) -> tuple[int, int]:
        """The namespace descriptors; raises SpawnError once closed."""
        fds = self._fds
        if fds is None:
            raise SpawnError(f"the network namespace of {self.key} is closed")
        return fds

    def paths(self) -> tuple[str, str]:
        """``(--user=…, --net=…)`` files to join with ``nsenter``."""
        fds = self.fds
        me = os.getpid()
        return f"/proc/{me}/fd/{fds[0]}", f"/proc/{me}/fd/{fds[1]}"

    def dup(self) -> tuple[int, int]:
        """New descriptors of the namespace (the caller closes them): safe to use from another
        thread while the namespace may be released. Raises SpawnError once closed."""
        with self._lock:
            fds = self.fds
            first = os.dup(fds[0])
            try:
                return first, os.dup(fds[1])
            except OSError:
                os.close(first)
                raise

    def holds(self, pid: int) -> bool:
        """True when process ``pid`` lives in this namespace."""
        fds = self._fds
        if fds is None:
            return False
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino == os.fstat(fds[1]).st_ino
        except OSError:
            return False

    def diag(self, make: Callable[[tuple[int, int]], socket.socket]) -> socket.socket | None:
        """A ``NETLINK_SOCK_DIAG`` socket of this namespace (made once by ``make``, from
        duplicated descriptors): lists the namespace's listeners without walking processes."""
        if self._diag is None and self._fds is not None:
            try:
                fds = self.dup()
            except (OSError, SpawnError):
                return None
            try:
                self._diag = make(fds)
            except OSError:
                return None
            finally:
                for fd in fds:
                    os.close(fd)
        return self._diag

    def close(self) -> None:
        """Let the namespace go (processes still inside keep it until they end)."""
        with self._lock:
            fds, self._fds = self._fds, None
            if self._diag is not None:
                self._diag.close()
                self._diag = None
        for fd in fds or ():
            with contextlib.suppress(OSError):
                os.close(fd)


class Loopbacks:
    """The network namespaces of this process, one per project, made on a run's first need."""

    def __init__(self, make: Callable[[], tuple[int, int]] | None = None) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._fd_lock = threading.Lock()
        self._by_key: dict[str, Loopback] = {}
        self._pid = os.getpid()
        # A namespace being made, or made, before a project asked for one (``make_ahead``).
        self._ahead: concurrent.futures.Future[tuple[int, int]] | None = None
        self.made_ahead = 0  # namespaces a project took from ``make_ahead``

    def _reset_after_fork(self) -> None:
        if self._pid != os.getpid():
            # Inherited across a fork: the descriptors are the parent's to manage.
            self._by_key = {}
            self._ahead = None
            self._pid = os.getpid()

    def make_ahead(self) -> None:
        """Start making a namespace for the next project that has none, unless this process
        has one (or one on its way): a host's first sandbox then need not wait for the fork
        server to make it (4-5 ms) after its policy. Made on a thread of its own; returns at
        once. A namespace is a new ``lo`` and nothing else: which project takes it does not
        matter."""
        with self._lock:
            self._reset_after_fork()
            if self._ahead is not None or self._by_key:
                return
            ahead: concurrent.futures.Future[tuple[int, int]] = concurrent.futures.Future()
            self._ahead = ahead

        def work() -> None:
            try:
                ahead.set_result(self._create())
            except BaseException as err:
                ahead.set_exception(err)

        threading.Thread(target=work, name="run_bash-netns", daemon=True).start()

    def _new(self) -> tuple[int, int]:
        """A namespace for a project that has none: the one made ahead if there is one (waited
        for if on its way), else a new one. Callers hold ``_lock``."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            try:
                fds = ahead.result()
            except BaseException:
                pass  # made the usual way below (and reported there if it fails again)
            else:
                self.made_ahead += 1
                return fds
        return self._create()

    def acquire(self, key: str, user: str, hold: bool = True) -> Loopback:
        """Project ``key``'s namespace, held for ``user`` (a session id) until ``release``.
        ``hold=False`` (a prepared sandbox): not held, so an idle namespace may still be let go
        (a run taking the sandbox then ``hold``s it, or finds it gone). Raises SpawnError when
        it cannot be made."""
        with self._lock:
            self._reset_after_fork()
            loop = self._by_key.get(key)
            if loop is None:
                loop = Loopback(key, self._new(), self._fd_lock)
                loop.idle_since = time.monotonic()
                self._by_key[key] = loop
            if hold:
                loop.users.add(user)
            return loop

    def hold(self, loop: Loopback, user: str) -> bool:
        """Hold ``loop`` for ``user`` if it is still its project's namespace; whether it is."""
        with self._lock:
            if self._pid != os.getpid() or self._by_key.get(loop.key) is not loop:
                return False
            loop.users.add(user)
            return True

    def release(self, loop: Loopback, user: str) -> None:
        """``user`` no longer needs ``loop``; idle namespaces beyond ``MAX_IDLE`` are closed."""
        with self._lock:
            if self._pid != os.getpid():
                return
            if user in loop.users:  # (a prepared sandbox never held it)
                loop.users.discard(user)
                if not loop.users:
                    loop.idle_since = time.monotonic()
            idle = sorted(
                (x for x in self._by_key.values() if not x.users), key=lambda x: x.idle_since
            )
            gone = idle[: max(0, len(idle) - MAX_IDLE)]
            for x in gone:
                del self._by_key[x.key]
        for x in gone:
            x.close()

    def current(self, key: str) -> Loopback | None:
        """Project ``key``'s namespace as runs get it now (None: none is kept)."""
        with self._lock:
            if self._pid != os.getpid():
                return None
            return self._by_key.get(key)

    def active(self) -> list[Loopback]:
        """The namespaces some run holds now."""
        with self._lock:
            return [x for x in self._by_key.values() if x.users]

    def projects(self) -> list[str]:
        """The projects whose namespaces are held or kept."""
        with self._lock:
            return list(self._by_key)

    def close(self) -> None:
        """Let every namespace go (runs still inside keep theirs until they end)."""
        with self._lock:
            loops, self._by_key = list(self._by_key.values()), {}
            ahead, self._ahead = self._ahead, None
        for x in loops:
            x.close()
        if ahead is not None:  # made ahead and never taken: closed once made
            ahead.add_done_callback(_close_made)

    def _create(self) -> tuple[int, int]:
        if self._make is not None:
            return self._make()
        from run_bash.sandbox.launcher import launcher

        return launcher().netns()


def _close_made(made: concurrent.futures.Future[tuple[int, int]]) -> None:
    if made.exception() is None:
        for fd in made.result():
            with contextlib.suppress(OSError):
                os.close(fd)


LOOPBACKS = Loopbacks()
