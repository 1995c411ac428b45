"""The bubblewrap backend: Linux namespaces and bind mounts through ``bwrap``.

What the sandbox looks like (see doc/run_bash.txt, *run_bash-bubblewrap*):

* ``--unshare-all --unshare-user --disable-userns --die-with-parent --new-session --cap-drop ALL``:
  own pid, ipc, uts, cgroup, user (no nested user namespaces) and, by default, network namespaces;
  no capabilities; a new session (no TIOCSTI into a terminal); everything dies with the host.
* ``--proc /proc --dev /dev``: a /proc that shows only the sandbox's processes, a minimal /dev.
* ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are the run's private temp dir (a bind of it, so the
  runtime's cleanup and size accounting see the files).
* Read-only binds for the readable paths, read-write binds for the writable ones, read-only binds
  again for paths that must stay read-only inside a writable grant (Neovim's directories) and for
  the protected project files. The ``.git`` directory is bound onto itself, which makes it a mount
  point: it can be written into but not renamed, removed or replaced.
* Denied directories are covered with an empty tmpfs, denied files with /dev/null.
* The launcher's environment *is* the scrubbed one (``bwrap`` is pid 1's parent and its own
  environment would be readable through /proc otherwise), and bwrap inherits only fds 0/1/2.
* Limits: ``RLIMIT_FSIZE``, ``RLIMIT_NPROC`` and ``RLIMIT_DATA`` (memory, per process: there is
  no cgroup without systemd's help) through ``prlimit``: documented.
* Network: bwrap cannot filter by port. With ``sandbox.network.allow`` empty every run joins one
  network namespace shared by all run_bash runs of this host process (``netholder.py``): it has only
  a loopback, so there is no outside network and no host service is reachable, while a server
  started by one run (a background session) is reachable from the next. With entries, the run
  shares the host's network: everything is reachable, including other local services and abstract
  Unix sockets (all or nothing). ``allow_local_ports`` cannot be honoured without that.

Protected project paths that do not exist yet cannot be bind-mounted without creating them in the
project: they are watched instead (the same guard the sandlock backend uses): creating one stops the
run at once and removes it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from functools import lru_cache
from typing import ClassVar

from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.paths import is_under
from run_bash.sandbox.base import Availability, LaunchedBase, RunSpec, once
from run_bash.sandbox.guard import ProtectedFileGuard
from run_bash.sandbox.netholder import NET_HOLDER, bwrap_path, nsenter_path
from run_bash.sandbox.policy import Policy, build_policy
from run_bash.sandbox.proc import bash_path

PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm")
# Provided by --proc / --dev, never bound from the host.
VIRTUAL_ROOTS = ("/proc", "/dev")


@lru_cache(maxsize=1)
def prlimit_path() -> str | None:
    for p in ("/usr/bin/prlimit", "/bin/prlimit"):
        if os.access(p, os.X_OK):
            return p
    return shutil.which("prlimit")


def _depth(p: str) -> int:
    return p.rstrip("/").count("/")


def _bind_source_args(kind: str, path: str) -> list[str]:
    """Arguments binding ``path`` onto itself; a symlink stays a symlink (``/bin -> usr/bin``)."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return [kind, path, path]


def bwrap_args(
    policy: Policy, spec: RunSpec, extra_args: list[str] | None = None, shared_netns: bool = False
) -> list[str]:
    """The bwrap command line (without the program) for one run. Pure apart from lstat().

    ``shared_netns``: the run joins run_bash's shared network namespace (``--share-net`` inside it).
    """
    private = os.path.realpath(spec.tmpdir)
    args = [
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    if policy.network_allow or shared_netns:
        args.append("--share-net")
    args += ["--proc", "/proc", "--dev", "/dev"]

    def skip(p: str) -> bool:
        return any(is_under(p, v) for v in VIRTUAL_ROOTS)

    # (depth, order, args): parents before children, so a project under /tmp is bound on top of
    # the private /tmp; at equal depth read-only before read-write.
    binds: list[tuple[int, int, list[str]]] = []
    for p in policy.readable:
        if not skip(p) and os.path.lexists(p):
            binds.append((_depth(p), 1, _bind_source_args("--ro-bind", p)))
    for p in policy.writable:
        if not skip(p) and os.path.lexists(p):
            binds.append((_depth(p), 2, _bind_source_args("--bind", p)))
    for p in PRIVATE_MOUNTS:
        binds.append((_depth(p), 0, ["--bind", private, p]))
    for _d, _k, a in sorted(binds, key=lambda t: (t[0], t[1])):
        args += a
    for p in policy.read_only:
        if os.path.exists(p):
            args += ["--ro-bind", p, p]
    # .git directories: a bind onto itself makes the entry a mount point (no rename, no rmdir).
    for g in policy.git_dirs:
        if os.path.isdir(g):
            args += ["--bind", g, g]
    for p in policy.protected:
        if os.path.lexists(p) and not os.path.islink(p):
            args += ["--ro-bind", p, p]
    for p in policy.denied:
        if not os.path.lexists(p) or not any(is_under(p, g) for g in _granted(policy)):
            continue
        if os.path.isdir(p) and not os.path.islink(p):
            args += ["--perms", "0000", "--tmpfs", p, "--remount-ro", p]
        else:
            args += ["--ro-bind", "/dev/null", p]
    args += list(extra_args or [])
    args += ["--chdir", spec.cwd]
    return args


def _granted(policy: Policy) -> list[str]:
    return [*policy.readable, *policy.writable]


class BwrapLaunched(LaunchedBase):
    """A running bwrap; its pid is bwrap's (pid 1 of the sandbox is its child). Killing bwrap's
    group kills the run: its children die with it (--die-with-parent sets their parent-death
    signal; pid 1 of the namespace takes every other process down with it)."""

    def __init__(self, proc: subprocess.Popen[bytes], guard: ProtectedFileGuard | None) -> None:
        super().__init__(proc.pid, guard)
        self.proc = proc

    def _wait(self) -> int:
        return self.proc.wait()


class Bubblewrap:
    """Namespaces and bind mounts through bubblewrap."""

    name: ClassVar[str] = "bubblewrap"
    isolates: ClassVar[bool] = True

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.opts = self.config.sandbox.backends.bubblewrap
        self._availability: Availability | None = None
        self._warned_net = False
        self._said: set[str] = set()

    def availability(self) -> Availability:
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        bwrap = bwrap_path()
        if bwrap is None:
            return Availability(
                False, "bwrap not found", "install bubblewrap (apt/dnf/pacman install bubblewrap)"
            )
        if bash_path() is None:
            return Availability(False, "bash not found", "install bash")
        version = ""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            version = subprocess.run(
                [bwrap, "--version"], capture_output=True, text=True, timeout=5
            ).stdout.strip()
        probe = [
            bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "true",
        ]
        try:
            res = subprocess.run(
                probe,
                capture_output=True,
                text=True,
                timeout=10,
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as e:
            return Availability(
                False, f"bwrap failed to run: {e}", "check the bwrap install", version
            )
        if res.returncode != 0:
            err = (res.stderr or "").strip().splitlines()
            why = err[-1] if err else f"exit {res.returncode}"
            return Availability(
                False,
                f"bwrap cannot create namespaces: {why}",
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                "on Ubuntu an AppArmor profile for bwrap) or use the sandlock backend",
                version,
            )
        return Availability(True, version=version)

    def validate(self) -> list[str]:
        """Problems that would make every run fail: extra arguments bwrap rejects."""
        extra = list(self.opts.extra_args)
        key = "`sandbox.backends.bubblewrap.extra_args`"
        if not extra:
            return []
        if "--" in extra:
            return [f"{key} must not contain `--`"]
        if not self.availability().ok:
            return []
        error = self._dry_run(extra)
        if error and not self._dry_run([]):
            return [f"{key}: bwrap rejects them: {error}"]
        return []

    def _dry_run(self, extra: list[str]) -> str:
        """Build a sandbox the way a run in the current directory would and run ``true`` in it;
        return bwrap's complaint ("" when it worked). bwrap reads its whole command line and
        builds every mount before it runs anything, so this finds what a real run would hit."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="run_bash-validate-") as tmp:
            cwd = os.getcwd()
            spec = RunSpec(cmd="true", cwd=cwd, env={}, stdout_fd=-1, tmpdir=tmp, session_id="")
            policy = build_policy(self.config, cwd, scan_ports=False)
            argv = [bwrap_path() or "bwrap", *bwrap_args(policy, spec, extra)]
            argv += ["--", bash_path() or "/bin/bash", "-c", "true"]
            try:
                res = subprocess.run(
                    argv,
                    capture_output=True,
                    text=True,
                    timeout=10,
                    stdin=subprocess.DEVNULL,
                    env={"PATH": "/usr/bin:/bin"},
                    close_fds=True,
                )
            except (OSError, subprocess.SubprocessError) as e:
                return str(e)
        if res.returncode == 0:
            return ""
        lines = (res.stderr or "").strip().splitlines()
        return lines[-1] if lines else f"exit {res.returncode}"

    def warnings(self) -> list[str]:
        return []

    def argv(
        self, policy: Policy, spec: RunSpec, netns: tuple[str, str] | None = None
    ) -> list[str]:
        """The full command line; ``netns``: the (user, net) namespace files of run_bash's shared
        loopback to join first."""
        bwrap = bwrap_path() or "bwrap"
        bash = bash_path() or "/bin/bash"
        extra = list(self.opts.extra_args)
        prefix: list[str] = []
        pl = prlimit_path()
        if pl:
            size = policy.limits.max_file_size
            nproc = policy.limits.max_processes
            mem = policy.limits.max_memory
            prefix = [
                pl,
                f"--fsize={size}:{size}",
                f"--nproc={nproc}:{nproc}",
                # Per process (no cgroup without systemd's help): heap and private writable
                # mappings; address space merely reserved (JVM, V8, Go) does not count.
                f"--data={mem}:{mem}",
                "--",
            ]
        join: list[str] = []
        if netns is not None and not policy.network_allow:
            join = [
                nsenter_path() or "nsenter",
                f"--user={netns[0]}",
                f"--net={netns[1]}",
                "--preserve-credentials",
                "--",
            ]
            # Keep the real ids inside (the joined user namespace maps them to 0).
            extra = ["--uid", str(os.getuid()), "--gid", str(os.getgid()), *extra]
        inner = bwrap_args(policy, spec, extra, shared_netns=bool(join))
        return [*prefix, *join, bwrap, *inner, "--", bash, "-c", spec.cmd]

    def spawn(self, spec: RunSpec) -> BwrapLaunched:
        avail = self.availability()
        if not avail.ok:
            raise SpawnError(f"bubblewrap unavailable: {avail.reason}; {avail.advice}")
        policy = spec.policy
        if not isinstance(policy, Policy):
            policy = build_policy(self.config, spec.cwd)
        env = dict(spec.env)
        # Inside, the private temp dir is /tmp.
        env["TMPDIR"] = "/tmp"
        holder = None
        notes: list[str] = []
        if not policy.network_allow:
            holder = NET_HOLDER.paths()
            if holder is None and not self._warned_net:
                self._warned_net = True
                notes.append(
                    "bubblewrap: no shared network namespace "
                    f"({NET_HOLDER.error}); each run has its own loopback"
                )
        argv = self.argv(policy, spec, holder)
        missing = [p for p in policy.protected if not os.path.lexists(p)]
        guard = ProtectedFileGuard(policy) if missing else None
        try:
            proc = subprocess.Popen(
                argv,
                cwd="/",
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=spec.stdout_fd,
                stderr=spec.stdout_fd if spec.stderr_fd is None else spec.stderr_fd,
                close_fds=True,
                start_new_session=True,
                restore_signals=True,
            )
        except OSError as e:
            raise SpawnError(f"bubblewrap could not start: {e}") from e
        launched = BwrapLaunched(proc, guard)
        if guard is not None:
            guard.start()
            launched.notices.extend(guard.notices)
        launched.notices.extend(once(self._said, [*notes, *policy.warnings]))
        return launched
