"""The sandlock backend: Landlock + seccomp user notification through sandlock's Python SDK.

How the design's requirements map onto sandlock 0.9 (see doc/run_bash.txt, *run_bash-sandlock*):

* **No chroot mode.** sandlock's ``chroot="/"`` + ``fs_mount={"/tmp": private}`` would give a
  private /tmp, but in sandlock 0.9.0 that mode breaks everyday work (measured here: ``git commit``
  cannot add objects, ``tar cf`` cannot create its archive, ``cc`` crashes, ``python -m venv``
  leaves an unusable venv). So the run's private temp dir is its ``TMPDIR`` (writable, and set in
  the environment); the shared /tmp, /var/tmp and /dev/shm are not granted at all, so a hard-coded
  ``/tmp/x`` fails with EACCES instead of reaching the host's /tmp and its sockets.
* **Filesystem.** ``fs_readable`` / ``fs_writable`` / ``fs_denied`` from the policy: Landlock for
  the grants, sandlock's seccomp deny check for denied paths inside granted trees.
* **Protected project files.** Landlock cannot make part of a writable tree read-only, and a
  seccomp deny of ``.git/config`` would also block git from reading it. Protected paths that do not
  exist yet are denied (they cannot be created by name). Everything else protected (existing
  ``.git/config``, ``.git/hooks``, ``.envrc``…) and the ``.git`` directory entry itself are kept by
  a guard: a snapshot before the run, an inotify watcher while it is alive that, on any change,
  kills the whole run first and then restores the snapshot, and a final comparison after exit.
  Restores are reported in ``Launched.notices``. The limit: a change exists on disk for the few
  milliseconds between the write and the restore (bubblewrap has no such window).
* **Environment.** ``clean_env=True`` plus ``env=spec.env`` (sandlock's clean env is empty).
* **Limits.** ``max_processes`` and ``max_memory`` (sandlock's supervisor), ``RLIMIT_FSIZE`` set on
  the child with prlimit(2) right after ``popen`` returns (microseconds, long before bash could
  have forked or written a large file).
* **Capabilities.** When the host holds capabilities (running as root), every ``popen`` happens on
  one long-lived spawner thread that dropped all of its own capabilities (bounding, inheritable,
  ambient, permitted, effective: capabilities are per thread on Linux) when it started. The child
  inherits that empty set, and exec as uid 0 gains nothing from an empty bounding set, so neither
  bash nor a setuid program it runs gets any (no device nodes, no mounts, no reading of files root
  could otherwise bypass permissions on). The thread lives as long as the host because sandlock's
  child gets its parent-death signal when the *thread* that forked it exits. This replaces an
  exec through ``setpriv`` (one more exec under supervision: ~3-6 ms per run). Without
  capabilities there is nothing to drop and ``popen`` runs on the caller's thread.
* **Network.** ``net_allow`` = the user's ``host:port`` endpoints plus TCP to loopback;
  ``net_deny`` = loopback ports other local services listen on (not run_bash's own sessions and
  not ``allow_local_ports``); ``net_allow_bind=["*"]`` so servers can listen. Abstract Unix sockets
  and signals outside the sandbox are scoped by Landlock (ABI 6).
* **Stdio and fds.** ``Sandbox.popen`` only knows INHERIT/PIPED/NULL. INHERIT is used with the
  host's fds 0/1/2 temporarily pointed at /dev/null and the run's output pipe (``_stdio_as``); the
  original fds are restored before ``spawn`` returns. sandlock closes every other descriptor in the
  child (checked by the security suite).
* **Where the supervisor runs.** In a thread of the host process (one per live run); the confined
  process is a direct child of the host. If the host dies the supervisor dies with it: the seccomp
  listener closes, every syscall sandlock mediates fails from then on, and the host's keeper
  sweeps what is left by recorded pid and start time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import shutil
import signal
import stat
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, ClassVar

from run_bash.config import Config, parse_size
from run_bash.errors import SpawnError
from run_bash.paths import expand
from run_bash.sandbox.base import Availability, RunSpec
from run_bash.sandbox.policy import Policy, build_policy
from run_bash.sandbox.proc import bash_path, children, descendants, session_tag, signal_group

MIN_ABI = 6
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024
# Shared temp dirs a profile may list as writable: dropped (other programs' sockets live there).
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


@lru_cache(maxsize=1)
def host_has_capabilities() -> bool:
    """True when this process holds any capability (typically: running as root)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                caps = line.startswith(("CapEff:", "CapPrm:", "CapAmb:", "CapInh:"))
                if caps and int(line.split()[1], 16):
                    return True
    except OSError:
        return os.geteuid() == 0
    return False


PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CAP_FIELDS = ("CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:")


def drop_thread_capabilities() -> None:
    """Drop every capability of the calling thread, irreversibly; raise OSError if any remains."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)  # pid 0: this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty
    if libc.capset(header, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
    with open("/proc/thread-self/status") as f:
        left = [ln.split()[0] for ln in f if ln.startswith(_CAP_FIELDS) and int(ln.split()[1], 16)]
    if left:
        raise OSError(f"capabilities left after dropping them: {', '.join(left)}")


class _CaplessSpawner:
    """A thread without capabilities that runs spawn functions for the rest of the host's life."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: list[tuple[Any, dict[str, Any], threading.Event]] = []
        self._wake = threading.Condition(self._lock)
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="run_bash-spawner", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        try:
            drop_thread_capabilities()
        except BaseException as e:
            self._error = e
        self._ready.set()
        while True:
            with self._wake:
                while not self._jobs:
                    self._wake.wait()
                fn, box, done = self._jobs.pop(0)
            try:
                if self._error is not None:
                    raise self._error
                box["value"] = fn()
            except BaseException as e:
                box["error"] = e
            done.set()

    @property
    def error(self) -> BaseException | None:
        """Why the thread could not drop its capabilities (then nothing is spawned)."""
        return self._error

    def call(self, fn: Any) -> Any:
        """Run ``fn`` on the spawner thread and return its result (or raise its exception)."""
        box: dict[str, Any] = {}
        done = threading.Event()
        with self._wake:
            self._jobs.append((fn, box, done))
            self._wake.notify()
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]


@lru_cache(maxsize=1)
def capless_spawner() -> _CaplessSpawner:
    """The host's one spawner thread (created on the first privileged spawn)."""
    return _CaplessSpawner()


# -- extra_args of the sandlock CLI ---------------------------------------------------------------

_ARG_MAP = {
    "-w": "fs_writable",
    "--fs-write": "fs_writable",
    "-r": "fs_readable",
    "--fs-read": "fs_readable",
    "--fs-deny": "fs_denied",
    "--net-allow": "net_allow",
    "--max-memory": "max_memory",
    "--max-processes": "max_processes",
}
_ARG_OPTION = {
    "fs_writable": "sandbox.rules.fs_writable",
    "fs_readable": "sandbox.rules.fs_readable",
    "fs_denied": "sandbox.rules.fs_denied",
    "net_allow": "sandbox.network.allow",
    "max_memory": "sandbox.limits.max_memory",
    "max_processes": "sandbox.limits.max_processes",
}


def map_extra_args(args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Map sandlock CLI arguments onto SDK fields; return (fields, unmapped arguments)."""
    mapped: dict[str, list[str]] = {}
    unmapped: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        key, value = arg, None
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
        if key in _ARG_MAP:
            if value is None:
                if i + 1 >= len(args):
                    unmapped.append(arg)
                    break
                value = args[i + 1]
                i += 1
            mapped.setdefault(_ARG_MAP[key], []).append(value)
        elif arg == "--port-remap":
            pass  # run_bash's own servers are reachable without remapping
        else:
            unmapped.append(arg)
        i += 1
    return mapped, unmapped


# -- protected files: snapshot, watch, restore ---------------------------------------------------


def _read_small(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_SNAPSHOT_BYTES else None


def _state(path: str) -> Any:
    """A comparable description of ``path``: None (absent), ("file", mode, bytes), ("link",
    target), ("dir", mode, {name: state}) or ("other", mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return ("unreadable",)
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        data = _read_small(path)
        if data is None:  # too large or unreadable: compare by size and mtime, cannot restore
            return ("file", mode, (st.st_size, st.st_mtime_ns))
        return ("file", mode, data)
    if stat.S_ISDIR(st.st_mode):
        try:
            names = sorted(os.listdir(path))[:200]
        except OSError:
            names = []
        return ("dir", mode, {n: _state(os.path.join(path, n)) for n in names})
    return ("other", mode)


def _write_state(path: str, state: Any) -> None:
    """Recreate ``state`` at ``path`` (removing whatever is there)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    if state is None:
        return
    kind = state[0]
    if kind == "file" and isinstance(state[2], bytes):
        tmp = f"{path}.run_bash-restore"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, state[1])
        try:
            os.write(fd, state[2])
            os.fchmod(fd, state[1])
        finally:
            os.close(fd)
        os.replace(tmp, path)
    elif kind == "link":
        os.symlink(state[1], path)
    elif kind == "dir":
        os.mkdir(path, state[1])
        for name, sub in state[2].items():
            _write_state(os.path.join(path, name), sub)


class _Inotify:
    """Just enough inotify for the guard (ctypes; no dependency)."""

    IN_MODIFY = 0x2
    IN_ATTRIB = 0x4
    IN_CLOSE_WRITE = 0x8
    IN_MOVED_FROM = 0x40
    IN_MOVED_TO = 0x80
    IN_CREATE = 0x100
    IN_DELETE = 0x200
    IN_DELETE_SELF = 0x400
    IN_MOVE_SELF = 0x800
    ALL = 0xFFE
    _libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self) -> None:
        fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.fd = fd

    def watch(self, path: str, mask: int = ALL) -> bool:
        return self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask) >= 0

    def drain(self) -> bool:
        got = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return got
            except OSError:
                return got
            if not data:
                return got
            got = True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class _Guard:
    """Keeps the protected project files of one run unchanged.

    Before the run: a snapshot of every protected path and the identity (device, inode) of every
    guarded ``.git`` directory. While it runs: an inotify watcher on those paths and their parents;
    any event makes it compare with the snapshot, and on a difference it kills the run first (so
    nothing can race the repair) and then restores. After the run: one last comparison.
    """

    def __init__(self, policy: Policy, kill: Any) -> None:
        self.paths = [p for p in policy.protected]
        self.git_dirs = list(policy.git_dirs)
        self.kill = kill
        self.snapshot = {p: _state(p) for p in self.paths}
        self.identity: dict[str, tuple[int, int]] = {}
        for g in self.git_dirs:
            with contextlib.suppress(OSError):
                st = os.lstat(g)
                self.identity[g] = (st.st_dev, st.st_ino)
        self.notices: list[str] = []
        self.tripped = False
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: threading.Thread | None = None
        self._ino: _Inotify | None = None
        self._stopped = False

    def start(self) -> None:
        try:
            ino = _Inotify()
        except OSError as e:
            self.notices.append(
                f"protected files are only checked after the run (inotify: {e.strerror or e}; "
                "see fs.inotify.max_user_instances)"
            )
            return
        parents: set[str] = set()
        for p in self.paths:
            parents.add(os.path.dirname(p))
            if os.path.lexists(p):
                ino.watch(p)
                if os.path.isdir(p) and not os.path.islink(p):
                    with contextlib.suppress(OSError):
                        for name in os.listdir(p)[:200]:
                            ino.watch(os.path.join(p, name))
        for g in self.git_dirs:
            parents.add(os.path.dirname(g))
            ino.watch(g, _Inotify.IN_MOVE_SELF | _Inotify.IN_DELETE_SELF | _Inotify.IN_CREATE)
        for d in parents:
            if os.path.isdir(d):
                ino.watch(d, _Inotify.ALL)
        self._ino = ino
        self._thread = threading.Thread(target=self._run, name="run_bash-guard", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._ino is not None
        try:
            while True:
                try:
                    ready, _, _ = select.select([self._ino.fd, self._stop_r], [], [])
                except (OSError, ValueError):
                    return
                if self._stop_r in ready:
                    return
                if self._ino.drain():
                    self.check(live=True)
        finally:
            # Closing an inotify fd waits for an RCU grace period (milliseconds): done here, off
            # the caller's path.
            self._ino.close()
            with contextlib.suppress(OSError):
                os.close(self._stop_r)

    def changed(self) -> list[str]:
        out = [p for p in self.paths if _state(p) != self.snapshot[p]]
        for g, ident in self.identity.items():
            try:
                st = os.lstat(g)
                now: tuple[int, int] | None = (st.st_dev, st.st_ino)
            except OSError:
                now = None
            if now != ident:
                out.append(g)
        return out

    def check(self, live: bool = False) -> None:
        with self._lock:
            bad = self.changed()
            if not bad:
                return
            if live:
                self.tripped = True
                self.kill()
            self._restore(bad)

    def _restore(self, bad: list[str]) -> None:
        for g in [b for b in bad if b in self.identity]:
            self._restore_git_dir(g)
        for p in [b for b in self.paths if _state(b) != self.snapshot[b]]:
            try:
                _write_state(p, self.snapshot[p])
                what = "restored"
            except OSError as e:
                what = f"could not be restored ({e.strerror})"
            rel = os.path.basename(os.path.dirname(p)) + "/" + os.path.basename(p)
            self.notices.append(
                f"protected file {rel} was changed inside the sandbox; {what}"
                + ("; the run was stopped" if self.tripped else "")
            )

    def _restore_git_dir(self, g: str) -> None:
        """Put the original ``.git`` directory (found by inode) back under its name."""
        dev, ino = self.identity[g]
        parent = os.path.dirname(g)
        found = None
        for root, dirs, _files in os.walk(parent):
            for d in list(dirs):
                full = os.path.join(root, d)
                with contextlib.suppress(OSError):
                    st = os.lstat(full)
                    if (st.st_dev, st.st_ino) == (dev, ino):
                        found = full
                        break
            if found or root.count(os.sep) - parent.count(os.sep) > 3:
                dirs[:] = []
            if found:
                break
        if found == g:
            return
        if os.path.lexists(g):
            aside = f"{g}.run_bash-replaced-{int(time.time())}"
            with contextlib.suppress(OSError):
                os.rename(g, aside)
        if found:
            with contextlib.suppress(OSError):
                os.rename(found, g)
        self.notices.append(
            f"{os.path.basename(g)} directory was moved or replaced inside the sandbox; "
            + ("moved back" if found else "the original was not found")
        )

    def finish(self, notices: list[str]) -> None:
        """Stop watching, check one last time and add what was found to ``notices``."""
        self.stop()
        self.check()
        notices.extend(n for n in self.notices if n not in notices)

    def stop(self) -> None:
        """Stop watching. The watcher thread closes its own descriptors as it exits."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
        with contextlib.suppress(OSError):
            os.close(self._stop_w)
        if self._thread is None:
            with contextlib.suppress(OSError):
                os.close(self._stop_r)


def once(said: set[str], notes: list[str]) -> list[str]:
    """The notes not reported before (configuration warnings are said once per backend)."""
    out = [n for n in notes if n not in said]
    said.update(out)
    return out


# -- stdio ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _stdio_as(stdin_fd: int, out_fd: int, err_fd: int | None = None) -> Iterator[None]:
    """Point this process's fds 0/1/2 at (stdin_fd, out_fd, err_fd or out_fd) for the block.

    Why this is safe in the host: ``Sandbox.popen`` (INHERIT) forks inside this call, on the
    host's loop thread, and the block returns only after the fork. Nothing else of the host reads
    or writes fds 0/1/2 while the loop thread is here: the RPC transport runs on this same thread,
    and the other threads (sandlock supervisors, guards) never touch 0/1/2. The saved copies are
    close-on-exec and restored with dup2 in ``finally``, so the host's fds are the originals again
    even when popen raises. A closed fd 0/1/2 in the host is closed again afterwards.
    """
    saved: list[int | None] = []
    for fd in (0, 1, 2):
        try:
            saved.append(os.dup(fd))  # O_CLOEXEC: never inherited
        except OSError:
            saved.append(None)
    try:
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd if err_fd is None else err_fd, 2)
        yield
    finally:
        for fd, copy in zip((0, 1, 2), saved, strict=True):
            if copy is None:
                with contextlib.suppress(OSError):
                    os.close(fd)
            else:
                os.dup2(copy, fd, inheritable=fd != 0 or os.get_inheritable(copy))
                os.close(copy)


# -- the backend ---------------------------------------------------------------------------------


class SandlockLaunched:
    """A command started with ``Sandbox.popen``."""

    def __init__(self, proc: Any, sandbox: Any, session_id: str, guard: _Guard | None) -> None:
        self.proc = proc
        self.sandbox = sandbox
        self.pid: int = proc.pid
        self.pgid = self.pid
        self.session_id = session_id
        self.guard = guard
        self.notices: list[str] = []
        self._status: int | None = None
        self._closed = False

    def _kill_all(self) -> None:
        """SIGKILL the whole run: its group, its tree and processes tagged with its session."""
        signal_group(self.pgid, signal.SIGKILL)
        pids = set(descendants(self.pid))
        for child in children(os.getpid()):
            if child != self.pid and session_tag(child) == self.session_id:
                pids.add(child)
                pids.update(descendants(child))
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)

    def reap(self) -> int:
        if self._status is not None:
            return self._status
        res = self.proc.wait()
        sig = int(getattr(res, "signal", -1) or -1)
        code = int(res.exit_code)
        if sig > 0:
            self._status = -sig
        elif code >= 0:
            self._status = code
        else:  # KILLED / TIMEOUT: sandlock reports no number; the kernel's verdict is SIGKILL
            self._status = -int(signal.SIGKILL)
        if self.guard is not None:
            self.guard.check()
            self.notices.extend(n for n in self.guard.notices if n not in self.notices)
        return self._status

    def terminate(self, sig: int) -> None:
        signal_group(self.pgid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, sig)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._status is None:
            with contextlib.suppress(Exception):
                self.terminate(signal.SIGKILL)
            with contextlib.suppress(Exception):
                self.reap()
        if self.guard is not None:
            self.guard.finish(self.notices)


class Sandlock:
    """Landlock + seccomp through sandlock's Python SDK (the default backend)."""

    name: ClassVar[str] = "sandlock"
    isolates: ClassVar[bool] = True

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.opts = self.config.sandbox.backends.sandlock
        self._availability: Availability | None = None
        self._warned = False
        self._said: set[str] = set()
        self._profile_cache: tuple[str, float, dict[str, Any]] | None = None

    # -- availability and config ------------------------------------------------------------------

    def availability(self) -> Availability:
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        try:
            import sandlock
        except ImportError as e:
            return Availability(
                False,
                f"the sandlock Python package is not installed ({e})",
                "run `make deps` in the plugin directory (installs sandlock into its .venv)",
            )
        if bash_path() is None:
            return Availability(False, "bash not found", "install bash")
        try:
            abi = int(sandlock.landlock_abi_version())
        except Exception as e:  # the native library failed to load
            return Availability(False, f"sandlock cannot load: {e}", "reinstall sandlock")
        version = f"sandlock {getattr(sandlock, '__version__', '?')}, Landlock ABI {abi}"
        if abi < 1:
            return Availability(
                False,
                "the kernel has no Landlock (disabled or older than 5.13)",
                'enable Landlock (lsm=landlock,…) or use sandbox.backend = "bubblewrap"',
                version,
            )
        if abi < MIN_ABI and not self.opts.allow_degraded:
            return Availability(
                False,
                f"Landlock ABI {abi} < {MIN_ABI}: no signal or abstract-socket scoping",
                'use a kernel >= 6.12, sandbox.backend = "bubblewrap", or set '
                "sandbox.backends.sandlock.allow_degraded = true (weaker confinement)",
                version,
            )
        if host_has_capabilities() and capless_spawner().error is not None:
            return Availability(
                False,
                f"running with capabilities, which cannot be dropped: {capless_spawner().error}",
                "run Neovim as a normal user",
                version,
            )
        return Availability(True, version=version)

    def _profile_path(self) -> str | None:
        raw = self.opts.profile
        if not raw:
            return None
        return expand(raw)

    def _profile_fields(self) -> dict[str, Any]:
        """The profile's policy as SDK fields (cached by path and mtime); {} without a profile."""
        path = self._profile_path()
        if path is None:
            return {}
        mtime = os.stat(path).st_mtime
        if self._profile_cache and self._profile_cache[:2] == (path, mtime):
            return self._profile_cache[2]
        import dataclasses

        from sandlock import Sandbox
        from sandlock._profile import load_profile_path

        prof = load_profile_path(path)
        default = Sandbox()
        fields = {}
        for f in dataclasses.fields(prof):
            if f.metadata.get("runtime"):
                continue
            value = getattr(prof, f.name)
            if value != getattr(default, f.name):
                fields[f.name] = value
        self._profile_cache = (path, mtime, fields)
        return fields

    def validate(self) -> list[str]:
        """Problems that would make every run fail: a profile that is missing or does not load."""
        problems: list[str] = []
        raw = self.opts.profile
        key = "`sandbox.backends.sandlock.profile`"
        if raw:
            path = self._profile_path()
            if path is None:
                problems.append(f"{key}: cannot expand {raw!r}")
            elif not os.path.isfile(path):
                problems.append(f"{key}: {path} does not exist")
            elif self.availability().ok:
                try:
                    self._profile_fields()
                except Exception as e:
                    problems.append(f"{key}: {path}: {e}")
        return problems

    def warnings(self) -> list[str]:
        """One-time warnings about options that work differently here (extra_args)."""
        args = self.opts.extra_args
        if not args:
            return []
        mapped, unmapped = map_extra_args(list(args))
        out = []
        if mapped:
            names = ", ".join(f"{_ARG_OPTION[k]}" for k in mapped)
            out.append(
                "sandbox.backends.sandlock.extra_args: run_bash drives sandlock through its "
                f"Python API, not the CLI; applied as {names} (prefer those options)"
            )
        if unmapped:
            out.append(
                "sandbox.backends.sandlock.extra_args: ignored "
                + " ".join(unmapped)
                + " (no equivalent; use sandbox.backends.sandlock.profile for other settings)"
            )
        return out

    # -- building the sandbox ---------------------------------------------------------------------

    def sandbox_kwargs(self, policy: Policy, spec: RunSpec) -> tuple[dict[str, Any], list[str]]:
        """The ``Sandbox(...)`` arguments for one run, and notes about what was adjusted."""
        notes: list[str] = []
        private = os.path.realpath(spec.tmpdir)
        readable = list(policy.readable)
        writable = list(policy.writable)
        denied = list(policy.denied)
        net_allow = list(policy.network_allow)
        extra: dict[str, Any] = {}
        limits: dict[str, Any] = {
            "max_processes": policy.limits.max_processes,
            "max_memory": policy.limits.max_memory,
        }

        merged: dict[str, Any] = {}
        if self.opts.profile:
            merged.update(self._profile_fields())
        if self.opts.extra_args:
            mapped, _ = map_extra_args(list(self.opts.extra_args))
            for k, v in mapped.items():
                if k in ("max_memory", "max_processes"):
                    merged[k] = v[-1]
                else:
                    merged[k] = list(merged.get(k, [])) + v

        def grant(paths: Any) -> list[str]:
            out = []
            for p in paths or []:
                e = expand(str(p), base=spec.cwd)
                if e is not None:
                    out.append(e)
            return out

        readable += [p for p in grant(merged.pop("fs_readable", [])) if os.path.exists(p)]
        for p in grant(merged.pop("fs_writable", [])):
            if p in SHARED_TMP or p == "/":
                notes.append(
                    f"profile: writable {p} dropped (shared temp dirs hold other programs' "
                    "sockets; each run has a private TMPDIR)"
                )
                continue
            if os.path.exists(p):
                writable.append(p)
        denied += grant(merged.pop("fs_denied", []))
        net_allow += [str(x) for x in merged.pop("net_allow", [])]
        for k in ("max_memory", "max_processes"):
            if k in merged:
                v = merged.pop(k)
                if k == "max_processes":
                    limits[k] = min(int(v), limits[k])
                else:
                    size = parse_size(str(v)) if not isinstance(v, int) else v
                    if size:
                        limits[k] = min(size, limits[k])
        for k in ("clean_env", "env", "cwd", "workdir", "fs_mount", "fs_mount_ro", "chroot"):
            if merged.pop(k, None) is not None:
                notes.append(f"profile field {k} ignored: run_bash sets it")
        for k in ("uid", "gid", "name", "image", "on_exit", "on_error", "fs_storage"):
            merged.pop(k, None)
        extra.update(merged)  # net_deny, http_*, extra_deny_syscalls, max_open_files, ...

        # Protected paths that do not exist yet: denied, so they cannot be created by name
        # (open/creat, link, rename *from*); the guard covers the rest. Read-only carve-outs
        # (Neovim's directories under a writable grant) are denied too: Landlock cannot make a
        # subtree of a writable grant read-only, and sandlock's deny check can.
        for p in policy.protected:
            if not os.path.lexists(p):
                denied.append(p)
        denied += list(policy.read_only)

        loopback = ["tcp://127.0.0.0/8:*", "tcp://[::1]:*"]
        net_deny = list(extra.pop("net_deny", []))
        for port in policy.blocked_local_ports:
            net_deny += [f"tcp://127.0.0.0/8:{port}", f"tcp://[::1]:{port}"]
        kwargs: dict[str, Any] = {
            "fs_readable": list(dict.fromkeys(readable)),
            "fs_writable": list(dict.fromkeys([*writable, private])),
            "fs_denied": list(dict.fromkeys(denied)),
            "clean_env": True,
            "env": {**spec.env, "TMPDIR": private},
            "cwd": spec.cwd,
            "max_processes": int(limits["max_processes"]),
            "max_memory": int(limits["max_memory"]),
            "net_allow": list(dict.fromkeys(net_allow + loopback)),
            "net_deny": net_deny,
            "net_allow_bind": ["*"],
            "name": f"run_bash-{spec.session_id}"[:64],
        }
        kwargs.update(extra)
        return kwargs, notes

    def argv(self, cmd: str) -> list[str]:
        bash = bash_path() or "/bin/bash"
        return [bash, "-c", cmd]

    def spawn(self, spec: RunSpec) -> SandlockLaunched:
        avail = self.availability()
        if not avail.ok:
            raise SpawnError(f"sandlock unavailable: {avail.reason}; {avail.advice}")
        try:
            from sandlock import Sandbox
        except ImportError as e:  # pragma: no cover - availability checked it
            raise SpawnError(f"sandlock unavailable: {e}") from e
        policy = (
            spec.policy if isinstance(spec.policy, Policy) else build_policy(self.config, spec.cwd)
        )
        try:
            kwargs, notes = self.sandbox_kwargs(policy, spec)
        except Exception as e:
            raise SpawnError(f"sandlock policy: {e}") from e
        argv = self.argv(spec.cmd)
        if self.opts.allow_degraded:
            from sandlock import Protection

            kwargs["allow_degraded"] = list(Protection)
        try:
            sandbox = Sandbox(**kwargs)
        except Exception as e:
            raise SpawnError(f"sandlock rejected the policy: {e}") from e

        holder: dict[str, SandlockLaunched] = {}

        def kill_run() -> None:
            if "l" in holder:
                holder["l"]._kill_all()

        guard = _Guard(policy, kill_run) if (policy.protected or policy.git_dirs) else None
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:

            def popen() -> Any:
                with _stdio_as(devnull, spec.stdout_fd, spec.stderr_fd):
                    return sandbox.popen(argv)

            # As root, fork from the thread that holds no capabilities (see the module doc).
            proc = capless_spawner().call(popen) if host_has_capabilities() else popen()
        except Exception as e:
            why = _diagnose(kwargs) or str(e)
            raise SpawnError(
                f"sandlock could not build the sandbox: {why}; check `python -m run_bash policy` "
                'or use sandbox.backend = "bubblewrap"'
            ) from e
        finally:
            os.close(devnull)
        size = int(policy.limits.max_file_size)
        try:
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
        except OSError as e:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait()
            raise SpawnError(f"could not set the file-size limit of the sandbox: {e}") from e
        launched = SandlockLaunched(proc, sandbox, spec.session_id, guard)
        holder["l"] = launched
        if guard is not None:
            guard.start()
            launched.notices.extend(guard.notices)
        if not self._warned:
            self._warned = True
            launched.notices.extend(self.warnings())
        launched.notices.extend(once(self._said, [*notes, *policy.warnings]))
        return launched


def _diagnose(kwargs: dict[str, Any]) -> str:
    """Run ``true`` in the same sandbox with stderr captured, to learn why popen failed."""
    from sandlock import Sandbox

    r, w = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        with _stdio_as(devnull, devnull):
            os.dup2(w, 2)
            with contextlib.suppress(Exception):
                Sandbox(**kwargs).popen(["/bin/true"]).wait()
    finally:
        os.close(w)
        os.close(devnull)
    try:
        os.set_blocking(r, False)
        text = os.read(r, 4096).decode(errors="replace")
    except OSError:
        text = ""
    finally:
        os.close(r)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""
