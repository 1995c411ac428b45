"""The bubblewrap backend: Linux namespaces and bind mounts through ``bwrap``.

What the sandbox looks like (see doc/run_bash.txt, *run_bash-bubblewrap*):

* ``--unshare-all --unshare-user --disable-userns --die-with-parent --new-session --cap-drop ALL``:
  own pid, ipc, uts, cgroup, user (no nested user namespaces) and, by default, network namespaces;
  no capabilities; a new session (no TIOCSTI into a terminal); everything dies with the host.
* ``--proc /proc --dev /dev``: a /proc that shows only the sandbox's processes, a minimal /dev.
* ``--add-seccomp-fd``: the kernel interfaces a command has no use for (io_uring, bpf, keyctl,
  modules, …; ``seccomp.py``) fail with EPERM, as under sandlock.
* ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are the run's temp space: a tmpfs of ``max_temp_size``
  that the run's first process mounts on its private dir (``RUN_INIT``, ``tempfs.py``), bound on
  the three.
* Read-only binds for the readable paths, read-write binds for the writable ones, read-only binds
  again for paths that must stay read-only inside a writable grant (Neovim's directories) and for
  the protected project files. The ``.git`` directory is bound onto itself, which makes it a mount
  point: it can be written into but not renamed, removed or replaced.
* Denied directories are covered with an empty tmpfs, denied files with /dev/null.
* The launcher's environment *is* the scrubbed one (``bwrap`` is pid 1's parent and its own
  environment would be readable through /proc otherwise), and bwrap inherits only fds 0/1/2.
* Each run starts in its own pid namespace, capped by its ``pid_max`` (see ``RESERVED_PIDS``);
  inside the sandbox ``prlimit`` (a prepared sandbox's bash: its ``ulimit``,
  ``per_process_limits``) sets ``RLIMIT_FSIZE``, ``RLIMIT_NPROC`` (per run there) and
  ``RLIMIT_DATA`` (memory, per process). Where a memory cgroup can be made (``cgroups.py``), the
  run's first process joins the run's own, which caps the whole run's memory and tasks.
* Network: bwrap cannot filter by port. With ``sandbox.network.allow`` empty every run joins one
  network namespace shared by all run_bash runs of this host process (``netholder.py``): it has only
  a loopback, so there is no outside network and no host service is reachable, while a server
  started by one run (a background session) is reachable from the next. With entries, the run
  shares the host's network: everything is reachable, including other local services and abstract
  Unix sockets (all or nothing). ``allow_local_ports`` cannot be honoured without that.

Members of the host-read set that do not exist yet cannot be bind-mounted without creating them in
the project: the runtime's guard (``guard.py``) watches them, as it does for every backend: creating
one stops the run at once and removes it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.paths import is_under, lmode
from run_bash.sandbox import bwprobe, seccomp
from run_bash.sandbox.base import Availability, PopenLaunched, RunSpec, once, release
from run_bash.sandbox.bwprobe import (
    RESERVED_PIDS,
    RUN_INIT,
    bwrap_path,
    mount_path,
    nsenter_path,
    pid_max_for,
    prlimit_path,
    unshare_path,
)
from run_bash.sandbox.cgroups import CGROUPS, RunCgroup
from run_bash.sandbox.netholder import LOOPBACKS, Loopback, project_of
from run_bash.sandbox.policy import Policy, build_policy, point_temp
from run_bash.sandbox.proc import bash_path
from run_bash.sandbox.spare import (
    TRAMPOLINE,
    Ident,
    Planned,
    Spare,
    identities,
    mounts,
    plan_inputs,
    planning,
)
from run_bash.sandbox.tempfs import temp_size, tmpfs_data

PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm")
# Provided by --proc / --dev, never bound from the host.
VIRTUAL_ROOTS = ("/proc", "/dev")


def with_filter(argv: list[str], fd: int) -> list[str]:
    """``argv`` with bwrap told to install the seccomp filter in ``fd`` (``seccomp.py``) on the
    command; ``argv`` itself when there is none (``fd`` < 0). The filter's descriptor is not part
    of what a prepared sandbox is compared by: the filter is the same for every run."""
    if fd < 0:
        return argv
    at = argv.index(bwrap_path() or "bwrap") + 1
    return [*argv[:at], "--add-seccomp-fd", str(fd), *argv[at:]]


def _depth(p: str) -> int:
    return p.rstrip("/").count("/")


def _bind_source_args(kind: str, path: str, mode: int) -> list[str]:
    """Arguments binding ``path`` (``mode``: its ``lstat`` mode) onto itself; a symlink stays a
    symlink (``/bin -> usr/bin``)."""
    if stat.S_ISLNK(mode):
        return ["--symlink", os.readlink(path), path]
    return [kind, path, path]


def bwrap_args(
    policy: Policy,
    spec: RunSpec,
    extra_args: list[str] | None = None,
    shared_netns: bool = False,
    tmpfs_size: int = 0,
) -> list[str]:
    """The bwrap command line (without the program) for one run. Pure apart from lstat().

    ``shared_netns``: the run joins its project's network namespace (``--share-net`` inside it).
    ``tmpfs_size``: each temp dir is a tmpfs of its own of that size (where the run's first
    process could not mount one temp space for all three); 0: the private dir is bound on them.
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
    for order, kind, paths in ((1, "--ro-bind", policy.readable), (2, "--bind", policy.writable)):
        for p in paths:
            if not skip(p) and (mode := lmode(p)):
                binds.append((_depth(p), order, _bind_source_args(kind, p, mode)))
    for p in PRIVATE_MOUNTS:
        if tmpfs_size:
            binds.append((_depth(p), 0, ["--size", str(tmpfs_size), "--tmpfs", p]))
        else:
            binds.append((_depth(p), 0, ["--bind", private, p]))
    for _d, _k, a in sorted(binds, key=lambda t: (t[0], t[1])):
        args += a
    for p in policy.read_only:
        if os.path.exists(p):
            args += ["--ro-bind", p, p]
    # Git directories bound onto themselves (a mount point cannot be renamed or removed), then
    # the existing members of the host-read set read-only.
    for kind, p in policy.protect_binds():
        args += ["--bind", p, p] if kind == "self" else ["--ro-bind", p, p]
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


def per_process_limits(policy: Policy, spec: RunSpec) -> tuple[list[str], str]:
    """The per-process limits of a run inside bwrap (RLIMIT_FSIZE, RLIMIT_NPROC and
    RLIMIT_DATA, each soft and hard), as (the program that sets them before bash, bash's
    command). A prepared sandbox's bash (``TRAMPOLINE``) sets them itself with its ``ulimit``
    builtin before it waits (one program fewer to start; it exits 125 when it cannot), when
    its units are exact: sizes in whole KiB, and bash not in POSIX mode (``POSIXLY_CORRECT``
    or ``SHELLOPTS`` in the environment: file sizes would count in 512-byte blocks). Else, and
    for every other command, ``prlimit`` (none when it is missing)."""
    size = policy.limits.max_file_size
    nproc = policy.limits.max_processes
    # Per process (the whole run's cap is its cgroup, where there is one): heap and private
    # writable mappings; address space merely reserved does not count.
    mem = policy.limits.max_memory
    if (
        spec.cmd == TRAMPOLINE
        and size % 1024 == 0
        and mem % 1024 == 0
        and "POSIXLY_CORRECT" not in spec.env
        and "SHELLOPTS" not in spec.env
    ):
        return [], f"ulimit -f {size // 1024} -u {nproc} -d {mem // 1024} || exit 125; {TRAMPOLINE}"
    pl = prlimit_path()
    if not pl:
        return [], spec.cmd
    limits = [pl, f"--fsize={size}:{size}", f"--nproc={nproc}:{nproc}", f"--data={mem}:{mem}", "--"]
    return limits, spec.cmd


def _granted(policy: Policy) -> list[str]:
    return [*policy.readable, *policy.writable]


class BwrapLaunched(PopenLaunched):
    """A running bwrap; its pid is bwrap's (pid 1 of the sandbox is its child). Killing bwrap's
    group kills the run: its children die with it (--die-with-parent sets their parent-death
    signal; pid 1 of the namespace takes every other process down with it)."""


class Bubblewrap:
    """Namespaces and bind mounts through bubblewrap."""

    name: ClassVar[str] = "bubblewrap"
    isolates: ClassVar[bool] = True
    prepares: ClassVar[bool] = True

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.opts = self.config.sandbox.backends.bubblewrap
        self._availability: Availability | None = None
        self._pid_mode = ""  # set by the probe: "capped", "plain" or ""
        self._pid_note = ""  # why runs are not capped per run, when they are not
        self._warned_net = False
        self._said: set[str] = set()

    def availability(self) -> Availability:
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        """What bwrap can do here (``bwprobe``: probed once per host for the same programs)."""
        availability, self._pid_mode, self._pid_note = bwprobe.result()
        return availability

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
        """What the process limit becomes here when runs cannot be capped per run, and that
        there is no seccomp filter on an architecture ``seccomp.py`` has no numbers for."""
        if not self.availability().ok:
            return []
        said = []
        if self._pid_note:
            root = " (RLIMIT_NPROC does not apply to root)" if os.getuid() == 0 else ""
            said.append(f"bubblewrap: {self._pid_note}; max_processes is RLIMIT_NPROC only{root}")
        if seccomp.program() is None:
            said.append(
                f"bubblewrap: no seccomp filter on {os.uname().machine} (io_uring, bpf, keyctl "
                "and the other calls sandlock refuses stay open to commands)"
            )
        return said

    def falls_short(self) -> str:
        """What of the options bwrap cannot enforce: ``auto`` then prefers sandlock."""
        net = self.config.sandbox.network
        short = []
        if net.allow:
            short.append(
                "cannot limit the network to sandbox.network.allow (bwrap cannot filter by "
                "port: runs would share the host's network)"
            )
        if net.allow_local_ports:
            short.append(
                "cannot open sandbox.network.allow_local_ports (its runs have only their "
                "project's loopback)"
            )
        theirs = self.config.sandbox.backends.sandlock
        if theirs.profile is not None or theirs.extra_args:
            short.append("does not apply the options given to sandlock (backends.sandlock)")
        return "; ".join(short)

    def argv(
        self,
        policy: Policy,
        spec: RunSpec,
        netns: tuple[str, str] | None = None,
        cgroup_procs: tuple[str, ...] | list[str] = (),
        temp: int = 0,
    ) -> list[str]:
        """The full command line. ``netns``: the (user, net) namespace files of the project's
        loopback to join first; ``cgroup_procs``: the run's cgroups (``cgroups.py``); ``temp``:
        the size of its temp space (0: the private dir as it is).

        ``[nsenter --user --net] unshare --pid … sh -c RUN_INIT … bwrap … -- [prlimit … --] bash -c
        CMD``: the run's own pid and mount namespace, whose first process joins the run's
        cgroups, mounts its temp space and caps its pids (see ``RUN_INIT``, ``RESERVED_PIDS``),
        then the sandbox, and inside it the per-process limits. RLIMIT_NPROC is set inside bwrap's
        user namespace, where it counts the processes of this run only (set outside, a normal
        user's would count all of theirs).
        """
        bwrap = bwrap_path() or "bwrap"
        bash = bash_path() or "/bin/bash"
        extra = list(self.opts.extra_args)
        join: list[str] = []
        if netns is not None and not policy.network_allow:
            join = [
                nsenter_path() or "nsenter",
                f"--user={netns[0]}",
                f"--net={netns[1]}",
                "--preserve-credentials",
                "--",
            ]
        mode = self.pid_namespace()
        wrap: list[str] = []
        first: list[str] = []  # outside the namespaces: only when there is no pid namespace
        procs = list(cgroup_procs)
        if mode:
            wrap = [unshare_path() or "unshare"]
            if os.getuid() != 0:
                # A user namespace in which we are root, to create the others and write pid_max.
                # Joining the project's network namespace is no substitute: its user namespace
                # maps the user to themselves, so the capabilities that joining gives are gone
                # at the next exec.
                wrap += ["--user", "--map-root-user"]
            wrap += ["--pid", "--fork", "--kill-child", "--mount-proc", "--"]
            cap = ["-", "-"]
            if mode == "capped":
                cap = [str(pid_max_for(policy.limits.max_processes)), str(RESERVED_PIDS)]
            data = tmpfs_data(temp) if temp else "-"
            private = os.path.realpath(spec.tmpdir)
            wrap += ["/bin/sh", "-c", RUN_INIT, "run_bash-init", *cap, data, private]
            wrap += [mount_path() or "mount", *procs, "--"]
        elif procs:
            first = ["/bin/sh", "-c", RUN_INIT, "run_bash-init", "-", "-", "-", "-", "-"]
            first += [*procs, "--"]
        if join or (wrap and os.getuid() != 0):
            # Keep the real ids inside (the user namespace around bwrap maps them to 0).
            extra = ["--uid", str(os.getuid()), "--gid", str(os.getgid()), *extra]
        limits, cmd = per_process_limits(policy, spec)
        inner = bwrap_args(
            policy, spec, extra, shared_netns=bool(join), tmpfs_size=0 if mode else temp
        )
        return [*first, *join, *wrap, bwrap, *inner, "--", *limits, bash, "-c", cmd]

    def pid_namespace(self) -> str:
        """How runs get their own pid namespace: "capped" (with ``pid_max``), "plain" (without:
        a kernel before 6.14), or "" (``unshare`` cannot make one here)."""
        self.availability()
        return self._pid_mode

    def spawn(self, spec: RunSpec) -> BwrapLaunched:
        launched, notes, _key = self._start(spec, spec.cmd)
        launched.notices.extend(once(self._said, notes))
        return launched

    def _policy(self, spec: RunSpec) -> Policy:
        avail = self.availability()
        if not avail.ok:
            raise SpawnError(f"bubblewrap unavailable: {avail.reason}; {avail.advice}")
        policy = spec.policy
        if not isinstance(policy, Policy):
            policy = build_policy(self.config, spec.cwd)
        return policy

    @staticmethod
    def temp_space(policy: Policy) -> int:
        """The size of a run's temp space now (it moves with the memory available: ``tempfs``)."""
        return temp_size(policy.limits.max_temp_size)

    def _plan(
        self,
        spec: RunSpec,
        policy: Policy,
        cmd: str,
        loop: Loopback | None,
        cgroup: RunCgroup | None,
        temp: int | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of ``cmd`` in the sandbox of ``spec`` (``temp``: the
        size of its temp space, as ``temp_space`` says now unless given)."""
        env = point_temp(dict(spec.env), "/tmp")  # inside, the private temp dir is /tmp
        if temp is None:
            temp = self.temp_space(policy)
        run = replace(spec, cmd=cmd)
        argv = self.argv(
            policy, run, loop.paths() if loop else None, cgroup.procs if cgroup else (), temp
        )
        return argv, env

    def _start(
        self,
        spec: RunSpec,
        cmd: str,
        before: Callable[[list[str], Planned | None], None] | None = None,
    ) -> tuple[BwrapLaunched, list[str], tuple[list[str], dict[str, str]]]:
        """Start ``cmd`` in the sandbox of ``spec``; ``before(argv, planned)`` is called first
        (``planned``: how a spare's command line was made, ``spare.planning``)."""
        policy = self._policy(spec)
        loop: Loopback | None = None
        cgroup: RunCgroup | None = None
        notes: list[str] = []
        if not policy.network_allow:
            try:
                loop = LOOPBACKS.acquire(project_of(policy), spec.session_id, not spec.prepared)
            except SpawnError as e:
                if not self._warned_net:
                    self._warned_net = True
                    notes.append(
                        f"bubblewrap: no network namespace for the project ({e}); each run has "
                        "its own loopback"
                    )
        try:
            try:
                cgroup = CGROUPS.make(
                    spec.session_id, policy.limits.max_memory, tasks=policy.limits.max_processes
                )
            except OSError as e:
                raise SpawnError(f"bubblewrap: cannot make the run's memory cgroup: {e}") from e
            planned: Planned | None = None
            if spec.prepared:
                space = self.temp_space(policy)  # the one input not on the file system
                (argv, env), planned = planning(
                    policy,
                    plan_inputs(spec, cmd, loop, cgroup, space),
                    lambda: self._plan(spec, policy, cmd, loop, cgroup, space),
                )
            else:
                argv, env = self._plan(spec, policy, cmd, loop, cgroup)
            if before is not None:
                before(argv, planned)
            try:
                flt = seccomp.program_fd()
            except OSError as e:
                raise SpawnError(f"bubblewrap: cannot make the run's seccomp filter: {e}") from e
            try:
                proc = subprocess.Popen(
                    with_filter(argv, flt),
                    cwd="/",
                    env=env,
                    stdin=subprocess.DEVNULL if spec.stdin_fd is None else spec.stdin_fd,
                    stdout=spec.stdout_fd,
                    stderr=spec.stdout_fd if spec.stderr_fd is None else spec.stderr_fd,
                    close_fds=True,
                    pass_fds=(flt,) if flt >= 0 else (),
                    start_new_session=True,
                    restore_signals=True,
                )
            except OSError as e:
                raise SpawnError(f"bubblewrap could not start: {e}") from e
            finally:
                if flt >= 0:
                    os.close(flt)
        except BaseException:
            release(spec.session_id, cgroup, loop)
            raise
        launched = BwrapLaunched(proc)
        launched.session_id, launched.cgroup, launched.loopback = spec.session_id, cgroup, loop
        return launched, [*notes, *self.warnings(), *policy.warnings], (argv, env)

    # -- prepared sandboxes (spare.py) -----------------------------------------------------------

    def ready_ahead(self) -> None:
        """Start what a project's first sandbox needs whatever its policy says: the network
        namespace its runs join, when they join one (``Loopbacks.make_ahead``), and where this
        host makes its runs' cgroups, found and made once (``Cgroups.warm``: a dozen file system
        calls that a sandbox's preparation on a worker thread would each wait for the
        interpreter after, while the first command's policy has it). ``Spares`` calls this
        before it asks for a sandbox, on the asking thread (the host's start: its main thread,
        before ``ready``)."""
        if not self.config.sandbox.network.allow:
            LOOPBACKS.make_ahead()
        with contextlib.suppress(OSError):  # (met again, and reported, by the run's own)
            CGROUPS.warm()

    def prepare(self, spec: RunSpec) -> Spare:
        """Start the trampoline in the sandbox a run of ``spec`` would get (``spec.stdin_fd``:
        its command pipe). Raises SpawnError."""
        gen = mounts().generation()
        if gen is None:
            raise SpawnError("the mount table cannot be watched (/proc/self/mountinfo)")
        policy = self._policy(spec)
        paths = self._held(policy, spec)
        held: list[tuple[tuple[Ident, ...], Planned | None]] = []
        launched, notes, key = self._start(
            spec, TRAMPOLINE, lambda _argv, planned: held.append((identities(paths), planned))
        )
        idents, planned = held[0]
        spare = Spare(self, spec.cwd, launched, (key, launched.loopback), paths, idents, gen, notes)
        spare.planned = planned  # armed once it is ready (``Spares``)
        return spare

    def spare_key(self, spare: Spare, spec: RunSpec, keep: bool = False) -> object:
        """What ``spare`` would have to be built from to serve ``spec`` now (``spec`` carries
        the spare's tag and temp dir). ``keep``: a plan made again is made noting what it reads,
        and when it is the spare's, kept as how the spare is made from this policy (the next
        look at it is quick). Raises SpawnError."""
        policy = self._policy(spec)
        launched = spare.launched
        if not isinstance(launched, BwrapLaunched):
            return None
        loop = launched.loopback
        if not policy.network_allow and (
            loop is None or LOOPBACKS.current(project_of(policy)) is not loop
        ):
            return None  # a run now would join (or try again to join) another namespace
        planned = spare.planned
        space = self.temp_space(policy)
        inputs = plan_inputs(spec, TRAMPOLINE, loop, launched.cgroup, space)
        if planned is not None and planned.same(policy, inputs):
            return spare.key  # the same plan: made from the same things, which read the same

        def plan() -> tuple[list[str], dict[str, str]]:
            return self._plan(spec, policy, TRAMPOLINE, loop, launched.cgroup, space)

        if not keep:
            return (plan(), loop)
        made, again = planning(policy, inputs, plan)
        key = (made, loop)
        if again is not None and key == spare.key:
            spare.planned = again
        return key

    def adopt(self, spare: Spare) -> BwrapLaunched:
        """The started run of a spare a run takes (its notes said now)."""
        launched = spare.launched
        assert isinstance(launched, BwrapLaunched)
        if launched.loopback is not None and not LOOPBACKS.hold(launched.loopback, spare.tag):
            raise SpawnError("the project's network namespace was let go")
        launched.notices.extend(once(self._said, spare.notes))
        return launched

    @staticmethod
    def _held(policy: Policy, spec: RunSpec) -> tuple[str, ...]:
        """Every path a run of ``policy`` holds by inode: its binds, hidden paths, cwd and temp
        dir."""
        binds = [p for _k, p in policy.protect_binds()]
        return tuple(
            dict.fromkeys(
                [
                    spec.cwd,
                    os.path.realpath(spec.tmpdir),
                    *policy.readable,
                    *policy.writable,
                    *policy.read_only,
                    *binds,
                    *policy.denied,
                ]
            )
        )
