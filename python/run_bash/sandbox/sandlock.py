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
* **The host-read set.** Landlock cannot make part of a writable tree read-only, and a seccomp
  deny of ``.git/config`` would also block git from reading it (a deny of a name that does not
  exist yet makes git warn on every read of it, and does not stop ``mkdir``/``symlink``). The
  runtime's guard (``guard.py``) keeps it: kill on the first event, then restore. The limit: a
  change exists on disk for the moment between the write and the restore.
* **Environment.** ``clean_env=True`` plus ``env=spec.env`` (sandlock's clean env is empty).
* **Limits.** ``max_processes`` and ``max_memory`` (sandlock's supervisor), ``RLIMIT_FSIZE`` set on
  the child with prlimit(2) right after ``popen`` returns (microseconds, long before bash could
  have forked or written a large file).
* **Capabilities.** When the host holds capabilities (running as root), every ``popen`` happens on
  the capability-less spawner thread of ``capabilities.py``. This replaces an exec through
  ``setpriv`` (one more exec under supervision: ~3-6 ms per run).
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
import os
import resource
import signal
from collections.abc import Iterator
from typing import Any, ClassVar

from run_bash.config import Config, parse_size
from run_bash.errors import SpawnError
from run_bash.paths import expand
from run_bash.sandbox.base import Availability, LaunchedBase, RunSpec, once
from run_bash.sandbox.capabilities import capless_spawner, host_has_capabilities
from run_bash.sandbox.policy import Policy, build_policy
from run_bash.sandbox.proc import bash_path, children, descendants, session_tag, signal_group

MIN_ABI = 6
# Shared temp dirs a profile may list as writable: dropped (other programs' sockets live there).
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


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


class SandlockLaunched(LaunchedBase):
    """A command started with ``Sandbox.popen``."""

    def __init__(self, proc: Any, sandbox: Any, session_id: str) -> None:
        super().__init__(proc.pid)
        self.proc = proc
        self.sandbox = sandbox
        self.session_id = session_id

    def kill_all(self) -> None:
        """SIGKILL the whole run: its group, its tree and processes tagged with its session."""
        signal_group(self.pid, signal.SIGKILL)
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

    def _wait(self) -> int:
        res = self.proc.wait()
        sig = int(getattr(res, "signal", -1) or -1)
        code = int(res.exit_code)
        if sig > 0:
            return -sig
        if code >= 0:
            return code
        # KILLED / TIMEOUT: sandlock reports no number; the kernel's verdict is SIGKILL.
        return -int(signal.SIGKILL)


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

        # Read-only carve-outs (Neovim's directories under a writable grant) are denied: Landlock
        # cannot make a subtree of a writable grant read-only, and sandlock's deny check can.
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
        return [bash, "-c", utf8_script(cmd)]

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
        size = policy.limits.max_file_size
        try:
            resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (size, size))
        except OSError as e:
            with contextlib.suppress(Exception):
                proc.kill()
                proc.wait()
            raise SpawnError(f"could not set the file-size limit of the sandbox: {e}") from e
        launched = SandlockLaunched(proc, sandbox, spec.session_id)
        if not self._warned:
            self._warned = True
            launched.notices.extend(self.warnings())
        launched.notices.extend(once(self._said, [*notes, *policy.warnings]))
        return launched


def utf8_script(cmd: str) -> str:
    """``cmd`` as a bash script that is valid UTF-8 and runs the same bytes.

    sandlock passes argv through UTF-8 strings: a command holding invalid UTF-8 (from Lua, as
    surrogate escapes) would not run at all. Such a command becomes ``eval $'…'``, every byte that
    is not plain printable ASCII written as ``\\xHH``, so bash gets exactly the original bytes, as
    under the other backends.
    """
    try:
        cmd.encode("utf-8")
    except UnicodeEncodeError:
        pass
    else:
        return cmd
    out = []
    for byte in os.fsencode(cmd):
        char = chr(byte)
        if 0x20 <= byte < 0x7F and char not in "'\\":
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "eval $'" + "".join(out) + "'"


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
