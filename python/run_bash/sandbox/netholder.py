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
import shutil
import subprocess
import time
from functools import lru_cache

from run_bash.sandbox.proc import children


@lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


@lru_cache(maxsize=1)
def nsenter_path() -> str | None:
    for p in ("/usr/bin/nsenter", "/bin/nsenter"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("nsenter")


class NetHolder:
    """One network namespace shared by every run of this process, of both confining backends.

    A run's loopback is then the loopback of all run_bash runs: a server started by one (a
    background session) is reachable from the next, while the host's own services and the outside
    network are not (the namespace has nothing but ``lo``). It is created once by a short-lived
    ``bwrap --unshare-net``; this process keeps it alive by holding a descriptor of the network
    namespace and of the user namespace that owns it (bwrap creates the network namespace in an
    outer user namespace): bubblewrap runs join both with ``nsenter`` (``paths()``), sandlock runs
    through the namespace launcher, which receives the descriptors (``fds()``). When this process
    exits, the namespace goes away with the last run inside it.
    """

    NS_GET_USERNS = 0xB701

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None  # (user ns fd, net ns fd)
        self.error = ""
        self.pid = -1

    def fds(self) -> tuple[int, int] | None:
        """``(user ns fd, net ns fd)`` of the shared namespace, creating it when needed; None when
        it cannot be created (``error`` says why)."""
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

    def _create(self) -> tuple[int, int] | None:
        import fcntl

        bwrap, sleep = bwrap_path(), shutil.which("sleep") or "/bin/sleep"
        if bwrap is None or nsenter_path() is None:
            self.error = "bwrap not found" if bwrap is None else "nsenter not found (util-linux)"
            return None
        argv = [
            bwrap, "--unshare-net", "--unshare-user", "--die-with-parent", "--new-session",
            "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", sleep, "30",
        ]  # fmt: skip
        try:
            holder = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
            )
        except OSError as e:
            self.error = str(e)
            return None
        mine = os.readlink("/proc/self/ns/net")
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if holder.poll() is not None:
                    err = holder.stderr.read().decode(errors="replace") if holder.stderr else ""
                    self.error = (err.strip().splitlines() or ["bwrap exited"])[-1]
                    return None
                for pid in children(holder.pid):
                    try:
                        if os.readlink(f"/proc/{pid}/ns/net") == mine:
                            continue
                        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                    except OSError:
                        continue
                    try:
                        user = fcntl.ioctl(net, self.NS_GET_USERNS)
                    except OSError as e:
                        os.close(net)
                        self.error = f"cannot find the namespace's owner ({e})"
                        return None
                    os.set_inheritable(user, False)
                    return user, net
                time.sleep(0.005)
            self.error = "bwrap did not start"
            return None
        finally:
            with contextlib.suppress(OSError):
                holder.kill()
            with contextlib.suppress(Exception):
                holder.wait(timeout=2)
            if holder.stderr is not None:
                holder.stderr.close()


NET_HOLDER = NetHolder()
