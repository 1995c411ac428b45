"""run_bash's own network namespace: one loopback shared by every sandboxed run of a host.

With no outside network configured, runs of both confining backends join it: a server started by one
run (a background session) is reachable from the next, while the host's own services and the outside
network are not, because the namespace has nothing but ``lo``. A sandboxed listener in it can never
receive a connection meant for a service of the host.

API: ``NET_HOLDER.paths()`` (files to join with ``nsenter``), ``NET_HOLDER.fds()`` (the namespace
descriptors themselves) and ``NET_HOLDER.error`` (why the namespace could not be created).
"""

from __future__ import annotations

import contextlib
import os
import threading

from run_bash.errors import SpawnError


class NetHolder:
    """One network namespace shared by every run of this process, of both confining backends.

    A run's loopback is then the loopback of all run_bash runs: a server started by one (a
    background session) is reachable from the next, while the host's own services and the outside
    network are not (the namespace has nothing but ``lo``). It is made by a child of the sandbox
    launcher's fork server (``launcher.make_netns``: a user namespace mapping the user's own ids,
    a network namespace in it, ``lo`` brought up), which sends descriptors of both namespaces and
    exits; this process keeps the namespace alive by holding them. Bubblewrap runs join both with
    ``nsenter`` (``paths()``), sandlock runs through the launcher, which receives the descriptors
    (``fds()``). When this process exits, the namespace goes away with the last run inside it.
    Nothing but the kernel is needed: no bwrap, no ``ip``.
    """

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None  # (user ns fd, net ns fd)
        self._lock = threading.Lock()
        self.error = ""
        self.pid = -1

    def fds(self) -> tuple[int, int] | None:
        """``(user ns fd, net ns fd)`` of the shared namespace, creating it when needed; None when
        it cannot be created (``error`` says why)."""
        with self._lock:
            if self._fds is None or self.pid != os.getpid():
                self._fds = self._create()
                self.pid = os.getpid()
            return self._fds

    def paths(self) -> tuple[str, str] | None:
        """``(--user=…, --net=…)`` files to join, creating the namespace when needed."""
        fds = self.fds()
        if fds is None:
            return None
        me = os.getpid()
        return f"/proc/{me}/fd/{fds[0]}", f"/proc/{me}/fd/{fds[1]}"

    def holds(self, pid: int) -> bool:
        """True when process ``pid`` lives in this namespace (False before it exists)."""
        if self._fds is None or self.pid != os.getpid():
            return False
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino == os.fstat(self._fds[1]).st_ino
        except OSError:
            return False

    def close(self) -> None:
        """Let the namespace go (runs still inside keep it until they end)."""
        with self._lock:
            if self._fds is not None and self.pid == os.getpid():
                for fd in self._fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            self._fds = None

    def _create(self) -> tuple[int, int] | None:
        from run_bash.sandbox.launcher import launcher

        try:
            fds = launcher().netns()
        except SpawnError as e:
            self.error = str(e)
            return None
        self.error = ""
        return fds


NET_HOLDER = NetHolder()
