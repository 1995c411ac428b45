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
import signal
import subprocess
from functools import lru_cache
from typing import Any

from run_bash.sandbox.proc import children, descendants


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

    Readiness: bwrap (not setuid) lets its child write its own uid/gid maps, after the clone and
    after its ``--info-fd`` output, and brings ``lo`` up before it runs the command; a namespace
    taken before that has no maps (every run in it fails: "No permissions to create new
    namespace") or a loopback that is down, and a bwrap killed before it let its child go strands
    that child for good. So the holder's own command, which runs only once the namespace is
    complete, says so on a pipe; nothing is taken or killed before that. The command then waits
    on a second pipe that this process closes once it holds the namespace (or by dying), so the
    holder ends by itself at once and never outlives this process. No signal within
    ``READY_TIMEOUT_S`` or an early exit is a failure: tried once more, then reported as it is.
    """

    NS_GET_USERNS = 0xB701
    READY_TIMEOUT_S = 5.0
    ATTEMPTS = 2

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
        if bwrap_path() is None:
            self.error = "bwrap not found"
            return None
        if nsenter_path() is None:
            self.error = "nsenter not found (util-linux)"
            return None
        errors: list[str] = []
        for _ in range(self.ATTEMPTS):
            got = self._attempt(errors)
            if got is not None:
                self.error = ""
                return got
        self.error = "; then ".join(errors)
        return None

    def _attempt(self, errors: list[str]) -> tuple[int, int] | None:
        import fcntl
        import select

        argv = [
            bwrap_path() or "bwrap", "--unshare-net", "--unshare-user", "--die-with-parent",
            "--new-session", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
            "--", "/bin/sh", "-c", "echo ready; read _",
        ]  # fmt: skip
        ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
        release_r, release_w = os.pipe2(os.O_CLOEXEC)
        try:
            holder = subprocess.Popen(
                argv,
                stdin=release_r,
                stdout=ready_w,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
            )
        except OSError as e:
            for fd in (ready_r, ready_w, release_r, release_w):
                os.close(fd)
            errors.append(f"bwrap could not start: {e}")
            return None
        os.close(ready_w)
        os.close(release_r)
        got: tuple[int, int] | None = None
        try:
            readable, _, _ = select.select([ready_r], [], [], self.READY_TIMEOUT_S)
            signal_ = os.read(ready_r, 64) if readable else None
            if signal_ is None:
                errors.append(f"bwrap gave no readiness signal in {self.READY_TIMEOUT_S:.0f} s")
            elif not signal_.startswith(b"ready"):
                errors.append("bwrap exited before the namespace was ready")
            else:
                got = self._take(holder.pid, errors, fcntl)
        finally:
            os.close(ready_r)
            # The holder's command reads EOF and exits; bwrap ends with it.
            os.close(release_w)
            self._reap(holder, errors if got is None else None)
        return got

    def _take(self, holder_pid: int, errors: list[str], fcntl: Any) -> tuple[int, int] | None:
        """Descriptors of the (complete) namespaces of the holder's command."""
        mine = os.readlink("/proc/self/ns/net")
        for pid in children(holder_pid):
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
                errors.append(f"cannot find the namespace's owner ({e})")
                return None
            os.set_inheritable(user, False)
            return user, net
        errors.append("the holder's command was not found in a new network namespace")
        return None

    @staticmethod
    def _reap(holder: subprocess.Popen[bytes], errors: list[str] | None) -> None:
        """Wait for the holder to end by itself; kill what is left of it by pidfd, the command
        (a stranded bwrap child) before bwrap, so nothing is ever orphaned."""
        try:
            holder.wait(timeout=2)
        except subprocess.TimeoutExpired:
            for pid in reversed([holder.pid, *descendants(holder.pid)]):
                with contextlib.suppress(OSError):
                    pidfd = os.pidfd_open(pid)
                    try:
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    finally:
                        os.close(pidfd)
            with contextlib.suppress(subprocess.TimeoutExpired):
                holder.wait(timeout=2)
        if holder.stderr is not None:
            if errors is not None and holder.returncode is not None:
                text = holder.stderr.read().decode(errors="replace").strip()
                if text and errors:
                    errors[-1] += f" ({text.splitlines()[-1]})"
            holder.stderr.close()


NET_HOLDER = NetHolder()
