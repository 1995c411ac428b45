"""The sandlock backend: Landlock + seccomp user notification through sandlock's Python SDK, started
in a mount namespace by run_bash's namespace launcher (``launcher.py``).

How the design's requirements map onto sandlock 0.9 (see doc/run_bash.txt, *run_bash-sandlock*):

* **Where it runs.** Every run is forked by the host's single-threaded fork server, which unshares a
  mount namespace for it (inside a user namespace mapping the user's own ids when not root) and
  calls ``Sandbox.popen`` there: sandlock's supervisor is that run process, the confined command its
  child. Spawn failures are one ``SpawnError``; nothing runs unconfined.
* **Temp dirs.** ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are the run's temp space: a tmpfs of
  ``max_temp_size`` mounted on its private dir in the run's mount namespace (``tempfs.py``), bound on
  the three, and ``TMPDIR=/tmp``: a hard-coded ``/tmp/x`` works and never reaches the host's
  ``/tmp`` and the sockets in it. Granted paths under them (a project in ``/tmp``) are bound back.
* **Filesystem.** ``fs_readable`` / ``fs_writable`` from the policy (Landlock). Denied paths inside
  granted trees are covered by mounts (an empty tmpfs, /dev/null), Neovim's directories under a
  writable grant are read-only binds; ``fs_denied`` is left empty but for those directories that
  do not exist yet (sandlock 0.9.0 opens every file on the command's behalf once it is not empty,
  and that breaks opening a symlink itself: ``O_PATH|O_NOFOLLOW``, as tar does).
* **The host-read set.** The binds of ``Policy.protect_binds()``, in that order, as under
  bubblewrap: each ``.git`` directory bound onto itself (it can be written into but not renamed,
  removed or replaced), then the existing members (``.git/config``, hooks, ``.envrc`` …)
  read-only. Names that do not exist yet cannot be bound without creating them, and are not
  denied either (a deny makes git warn on every read of such a name and does not stop
  ``mkdir``/``symlink``): the runtime's guard (``guard.py``) watches them, as it does for every
  backend.
* **Environment.** ``clean_env=True`` plus ``env=spec.env`` (sandlock's clean env is empty).
* **Limits.** ``max_processes`` and ``max_memory`` (sandlock's supervisor: the run's mapped
  memory), ``max_memory`` again as the run's memory cgroup where one can be made (``cgroups.py``:
  the run process joins it first), ``RLIMIT_FSIZE`` set in the run process before ``popen``
  (inherited by the command), ``max_temp_size`` as the temp space's size.
* **Capabilities.** The run process drops every capability after building its mounts, before
  sandlock forks the command.
* **Network.** With no outside network configured, runs join their project's loopback-only
  network namespace (``netholder.py``, the one bubblewrap runs of the project join): host
  services and other projects' servers are unreachable, whenever they started, and no sandboxed
  listener can receive a host client's connection. With ``network.allow`` or ``allow_local_ports``, runs share the host's network:
  ``net_allow`` = the user's endpoints plus TCP to loopback, and each loopback ``connect`` is
  decided when it happens (``loopback.LoopbackGate``: only ports run_bash's sessions listen on and
  allowed ones); binds are limited to ports >= 1024 outside ``WELL_KNOWN_SERVICE_PORTS``. Abstract
  Unix sockets and signals outside the sandbox are scoped by Landlock (ABI 6).
* **Stdio and fds.** The run process's fds 0/1/2 are /dev/null and the run's output pipe (sent to
  the fork server with SCM_RIGHTS); ``popen`` inherits them. sandlock closes every other descriptor
  in the child (checked by the security suite).
* **Without user namespaces** (e.g. Ubuntu's AppArmor restriction for a normal user) the backend is
  unavailable with the reason, unless ``allow_degraded`` is set: then runs have no mount namespace
  (the shared ``/tmp`` is not granted, existing protected files are only guarded) and share the
  host's network with the connect-time checks.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.paths import is_under
from run_bash.sandbox import loopback
from run_bash.sandbox.base import Availability, LaunchedBase, RunSpec, once, release
from run_bash.sandbox.cgroups import RunCgroup
from run_bash.sandbox.launcher import EXIT_WAIT_S, STATUS_TIMEOUT_S, Run, launcher
from run_bash.sandbox.namespaces import TEMP_DIRS
from run_bash.sandbox.netholder import LOOPBACKS, Loopback, project_of
from run_bash.sandbox.policy import Policy, build_policy
from run_bash.sandbox.proc import bash_path, children, descendants, session_tag, signal_group
from run_bash.sandbox.sandlock_options import SandlockOptions, sdk_fields, utf8_script
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
from run_bash.sandbox.tempfs import full_notice, temp_size, tmpfs_data

MIN_ABI = 6


# -- the backend ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where a run lives: in its own mount namespace (private temp dirs, read-only protected
    files) or not (degraded), and in its project's network namespace or the host's."""

    mount_ns: bool = True
    shared_netns: bool = True


# The answer of the mount-namespace probe in this process, once asked (``Sandlock._probe_namespace``).
NAMESPACE_PROBE: list[str] = []


class SandlockLaunched(LaunchedBase):
    """A command started through the namespace launcher; ``pid`` is the confined root's."""

    def __init__(
        self,
        run: Run,
        session_id: str,
        loopback: Loopback | None = None,
        temp: int = 0,
        max_memory: int = 0,
    ) -> None:
        super().__init__(run.pid)
        self.run = run
        self.session_id = session_id
        self.loopback = loopback
        self.temp = temp  # the size of its temp space (0: none of its own)
        self.stages.update(run.marks)
        if run.cgroups:  # made by the launcher (``launcher.cap_memory``)
            memory = next(iter(run.cgroups))
            self.cgroup = RunCgroup(session_id, dict(run.cgroups), memory, max_memory)

    def pidfd(self) -> int:
        return os.dup(self.run.pidfd)

    def unconfined(self) -> set[int]:
        """Sandlock's supervisor (the run process): it exits once the confined root is gone,
        and ``settle`` waits for that."""
        return {self.run.supervisor} if self.run.supervisor else set()

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
        # The status comes from the run's supervisor once the root has exited; wait for the exit
        # itself first, so a supervisor that never reports cannot hold the session forever.
        with contextlib.suppress(OSError, ValueError):
            select.select([self.run.pidfd], [], [])
        return self.run.wait(STATUS_TIMEOUT_S)

    def ended(self) -> None:
        super().ended()
        if self.run.temp_full and self.temp:
            self.note([full_notice(self.temp)])

    def settle(self) -> None:
        """Wait (at most ``EXIT_WAIT_S``) for the run process to exit after it reported the
        status: its end of the channel closes then, and its cgroup can go at once (cgroups.py).
        Part of ``close``, not of ``reap``: the status is the run's result, this its clean-up."""
        if not self.run.reported:
            return
        self.run.reported = False
        with contextlib.suppress(OSError):
            self.run.chan.settimeout(EXIT_WAIT_S)
            while self.run.chan.recv(4096):
                pass

    def close(self) -> None:
        if self._closed:
            return
        self.settle()
        super().close()
        self.run.close()
        if self.run.temp_full and self.temp:
            self.note([full_notice(self.temp)])


class Sandlock:
    """Landlock + seccomp through sandlock's Python SDK."""

    name: ClassVar[str] = "sandlock"
    isolates: ClassVar[bool] = True
    prepares: ClassVar[bool] = True

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config()
        self.opts = self.config.sandbox.backends.sandlock
        self._availability: Availability | None = None
        self._warned = False
        self._said: set[str] = set()
        self.options = SandlockOptions(self.opts)
        # False when user namespaces are unavailable and allow_degraded is set (see availability).
        self.mount_ns = True

    # -- availability and config ------------------------------------------------------------------

    def availability(self) -> Availability:
        if self._availability is None:
            self._availability = self._probe()
        return self._availability

    def _probe(self) -> Availability:
        if bash_path() is None:
            return Availability(False, "bash not found", "install bash")
        # The fork server loads sandlock and says what it found (the host never imports it).
        try:
            facts = launcher().sandlock_facts()
        except SpawnError as e:
            return Availability(False, str(e), "run `make deps` in the plugin directory")
        abi = facts.get("abi")
        if not isinstance(abi, int) or isinstance(abi, bool):
            why = facts.get("error") or "no Landlock ABI reported"
            return Availability(False, f"sandlock cannot load: {why}", "reinstall sandlock")
        version = f"sandlock {facts.get('version', '?')}, Landlock ABI {abi}"
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
        why = self._probe_namespace(facts)
        if why and not self.opts.allow_degraded:
            return Availability(
                False,
                f"cannot build a run's mount namespace ({why}), which gives each run its "
                "private /tmp and keeps protected project files read-only",
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
                "on Ubuntu 24.04+ kernel.apparmor_restrict_unprivileged_userns=0), "
                'use sandbox.backend = "bubblewrap" (Ubuntu ships an AppArmor profile for '
                "bwrap), or set sandbox.backends.sandlock.allow_degraded = true (no private "
                "/tmp; protected files only watched)",
                version,
            )
        if why:
            self.mount_ns = False
            return Availability(True, version=f"{version}; degraded: no mount namespace ({why})")
        return Availability(True, version=f"{version}, mount namespace")

    def _probe_namespace(self, facts: dict[str, Any]) -> str:
        """Whether a run's mount namespace can be built, once per host: "" when it can, else
        why not, as the fork server found when it started (``facts``; a server that did not say
        counts as "cannot"). Every ``setup()`` makes new backend objects: the answer is kept."""
        if NAMESPACE_PROBE:
            return NAMESPACE_PROBE[0]
        why = facts.get("namespace")
        NAMESPACE_PROBE[:] = [why if isinstance(why, str) else "the sandbox launcher did not say"]
        return NAMESPACE_PROBE[0]

    def validate(self) -> list[str]:
        """Problems that would make every run fail: a profile that is missing or does not load."""
        return self.options.problems(self.availability().ok)

    def warnings(self) -> list[str]:
        """One-time warnings about options that work differently here (extra_args)."""
        return self.options.warnings()

    def falls_short(self) -> str:
        """Nothing: every option is enforced here."""
        return ""

    # -- building the sandbox ---------------------------------------------------------------------

    def sandbox_kwargs(
        self, policy: Policy, spec: RunSpec, layout: Layout | None = None
    ) -> tuple[dict[str, Any], list[str]]:
        """The ``Sandbox(...)`` arguments for one run, and notes about what was adjusted.

        ``layout`` defaults to this backend's: a mount namespace when it has one, and the shared
        network namespace unless the policy has outside network or allowed local ports.
        """
        kwargs, notes, _denied = self._build(policy, spec, layout)
        return kwargs, notes

    def _build(
        self, policy: Policy, spec: RunSpec, layout: Layout | None
    ) -> tuple[dict[str, Any], list[str], list[str]]:
        """``sandbox_kwargs`` and every denied path (the policy's and the profile's)."""
        layout = layout or Layout(self.mount_ns, not host_network(policy))
        return sdk_fields(
            policy,
            spec,
            mount_ns=layout.mount_ns,
            shared_netns=layout.shared_netns,
            profile=self.options.profile_fields() if self.opts.profile else {},
            extra_args=list(self.opts.extra_args or ()),
        )

    def argv(self, cmd: str) -> list[str]:
        bash = bash_path() or "/bin/bash"
        return [bash, "-c", utf8_script(cmd)]

    def request(
        self,
        policy: Policy,
        spec: RunSpec,
        layout: Layout,
        temp: int = 0,
    ) -> tuple[dict[str, Any], list[str]]:
        """What the launcher needs for one run (``forkserver.run_child``), and notes. ``temp``: the
        size of the run's temp space (0: the private dir as it is)."""
        kwargs, notes, denied = self._build(policy, spec, layout)
        if self.opts.allow_degraded:
            from sandlock import Protection

            kwargs["allow_degraded"] = [p.name for p in Protection]
        granted = [*kwargs["fs_readable"], *kwargs["fs_writable"], spec.cwd]
        under_temp = {
            p
            for p in granted
            if p not in TEMP_DIRS and any(is_under(p, t) for t in TEMP_DIRS) and os.path.lexists(p)
        }
        writable_set = set(kwargs["fs_writable"])
        # What the command can reach inside: the temp dirs themselves are the private dir.
        visible = [g for g in granted if g not in TEMP_DIRS]
        gate = None
        if not layout.shared_netns:
            ports, every = loopback.local_ports_allowed(policy.network_allow)
            gate = {
                "owner": os.getpid(),
                "allowed": sorted(ports | set(policy.allow_local_ports)),
                "every": every,
            }
        req = {
            "argv": self.argv(spec.cmd),
            "sandbox": kwargs,
            "tmp": os.path.realpath(spec.tmpdir),
            # The run's temp space: a size-limited tmpfs on the private dir (tempfs.py).
            "tmp_data": tmpfs_data(temp) if layout.mount_ns and temp else "",
            # The whole run's memory cap, as a memory cgroup where the launcher can make one.
            "memory_cap": int(policy.limits.max_memory),
            "mount_ns": layout.mount_ns,
            # Granted paths under the temp dirs, put back over the private dir, parents first.
            # Landlock's write grant of /tmp covers whatever is mounted below it, so only the
            # writable ones are writable binds; the rest are read-only binds.
            "reexpose": [
                ("rw" if p in writable_set else "ro", p)
                for p in sorted(under_temp, key=lambda p: (p.count("/"), p))
            ],
            # Neovim's directories under a writable grant read-only, then the host-read set's
            # binds in their own order (``.git`` directories onto themselves, then the existing
            # members read-only): as bubblewrap mounts them.
            "binds": [
                *(("ro", p) for p in policy.read_only if os.path.exists(p)),
                *policy.protect_binds(),
            ]
            if layout.mount_ns
            else [],
            "hide": [
                p for p in denied if os.path.exists(p) and any(is_under(p, g) for g in visible)
            ]
            if layout.mount_ns
            else [],
            "max_file_size": int(policy.limits.max_file_size),
            "gate": gate,
        }
        return req, notes

    def spawn(self, spec: RunSpec) -> SandlockLaunched:
        launched, notes, _req = self._start(spec, self.argv(spec.cmd))
        self._tell(launched, notes)
        return launched

    def _tell(self, launched: LaunchedBase, notes: list[str]) -> None:
        """Give a started run the notes it should carry (configuration warnings once)."""
        if not self._warned:
            self._warned = True
            launched.notices.extend(self.warnings())
        launched.notices.extend(once(self._said, notes))

    def _policy(self, spec: RunSpec) -> Policy:
        avail = self.availability()
        if not avail.ok:
            raise SpawnError(f"sandlock unavailable: {avail.reason}; {avail.advice}")
        return (
            spec.policy if isinstance(spec.policy, Policy) else build_policy(self.config, spec.cwd)
        )

    def temp_space(self, policy: Policy) -> int:
        """The size of a run's temp space now (it moves with the memory available: ``tempfs``);
        0 without a mount namespace (the private dir as it is)."""
        return temp_size(policy.limits.max_temp_size) if self.mount_ns else 0

    def _plan(
        self,
        spec: RunSpec,
        policy: Policy,
        argv: list[str],
        loop: Loopback | None,
        why: str = "",
        temp: int | None = None,
    ) -> tuple[dict[str, Any], list[str], int]:
        """The launcher's request for ``spec`` in the namespace ``loop`` (``why`` there is none),
        the notes about it, and the size of its temp space (``temp``: as ``temp_space`` says
        now, unless given)."""
        notes: list[str] = []
        if not host_network(policy) and loop is None:
            notes.append(
                f"sandlock: the project's own network namespace is unavailable ({why}); "
                "runs share the host's loopback, each connect checked when it happens"
            )
        if temp is None:
            temp = self.temp_space(policy)
        if not self.mount_ns:
            notes.append(
                "sandlock: no mount namespace, so the temp dir is on disk and "
                "sandbox.limits.max_temp_size is not enforced"
            )
        layout = Layout(self.mount_ns, loop is not None)
        try:
            req, adjusted = self.request(policy, spec, layout, temp)
        except Exception as e:
            raise SpawnError(f"sandlock policy: {e}") from e
        req["argv"] = argv
        return req, [*notes, *adjusted, *policy.warnings], temp

    def _loop(self, policy: Policy, user: str, hold: bool = True) -> tuple[Loopback | None, str]:
        """The project's network namespace, held for ``user``, or None and why (the host's
        network)."""
        if host_network(policy):
            return None, ""
        if not self.mount_ns:
            return None, "no mount namespace"
        try:
            return LOOPBACKS.acquire(project_of(policy), user, hold), ""
        except SpawnError as e:
            return None, str(e)

    def _start(
        self,
        spec: RunSpec,
        argv: list[str],
        before: Callable[[dict[str, Any], Planned | None], None] | None = None,
    ) -> tuple[SandlockLaunched, list[str], dict[str, Any]]:
        """Start ``argv`` in the sandbox of ``spec``; ``before(request, planned)`` is called
        first (``planned``: how a spare's request was made, ``spare.planning``)."""
        policy = self._policy(spec)
        loop, why = self._loop(policy, spec.session_id, not spec.prepared)
        try:
            planned: Planned | None = None
            if spec.prepared:
                space = self.temp_space(policy)  # the one input not on the file system
                (req, notes, temp), planned = planning(
                    policy,
                    plan_inputs(spec, argv, loop, space),
                    lambda: self._plan(spec, policy, argv, loop, why, space),
                )
            else:
                req, notes, temp = self._plan(spec, policy, argv, loop, why)
            if before is not None:
                before(req, planned)
            stderr = spec.stdout_fd if spec.stderr_fd is None else spec.stderr_fd
            stdin = -1 if spec.stdin_fd is None else spec.stdin_fd
            try:
                run = launcher().spawn(req, spec.stdout_fd, stderr, loop.fds if loop else (), stdin)
            except SpawnError as e:
                raise SpawnError(
                    f"sandlock could not start the command: {e}; check `python -m run_bash "
                    'policy` or use sandbox.backend = "bubblewrap"'
                ) from e
        except BaseException:
            release(spec.session_id, None, loop)
            raise
        launched = SandlockLaunched(run, spec.session_id, loop, temp, policy.limits.max_memory)
        return launched, notes, req

    # -- prepared sandboxes (spare.py) -----------------------------------------------------------

    def ready_ahead(self) -> None:
        """Start what a project's first sandbox needs whatever its policy says: the network
        namespace its runs join, when they join one (``Loopbacks.make_ahead``). ``Spares``
        calls this before it asks for a sandbox, on the asking thread (the host's start: its
        main thread, before ``ready``)."""
        net = self.config.sandbox.network
        if self.mount_ns and not shares_host_network(net.allow, net.allow_local_ports):
            LOOPBACKS.make_ahead()

    def prepare(self, spec: RunSpec) -> Spare:
        """Start the trampoline in the sandbox a run of ``spec`` would get (``spec.stdin_fd``:
        its command pipe). Raises SpawnError."""
        gen = mounts().generation()
        if gen is None:
            raise SpawnError("the mount table cannot be watched (/proc/self/mountinfo)")
        held: list[tuple[tuple[str, ...], tuple[Ident, ...], Planned | None]] = []

        def before(req: dict[str, Any], planned: Planned | None) -> None:
            paths = self._held(req, spec)
            held.append((tuple(paths), identities(paths), planned))

        launched, notes, req = self._start(spec, self.argv_trampoline(), before)
        key = (req, launched.loopback)
        paths, idents, planned = held[0]
        spare = Spare(self, spec.cwd, launched, key, paths, idents, gen, notes)
        spare.planned = planned  # armed once it is ready (``Spares``)
        return spare

    def spare_key(self, spare: Spare, spec: RunSpec, keep: bool = False) -> object:
        """What ``spare`` would have to be built from to serve ``spec`` now (``spec`` carries
        the spare's tag and temp dir). ``keep``: a plan made again is made noting what it reads,
        and when it is the spare's, kept as how the spare is made from this policy (the next
        look at it is quick). Raises SpawnError."""
        policy = self._policy(spec)
        launched = spare.launched
        if not isinstance(launched, SandlockLaunched):
            return None
        loop = launched.loopback
        if loop is None and not host_network(policy):
            return None  # a run now would try again to join the project's namespace
        if loop is not None and LOOPBACKS.current(project_of(policy)) is not loop:
            return None  # the project's namespace is another one now
        argv = self.argv_trampoline()
        space = self.temp_space(policy)
        inputs = plan_inputs(spec, argv, loop, space)
        planned = spare.planned
        if planned is not None and planned.same(policy, inputs):
            return spare.key  # the same plan: made from the same things, which read the same
        if not keep:
            req, _notes, _temp = self._plan(spec, policy, argv, loop, temp=space)
            return (req, loop)
        (req, _notes, _temp), again = planning(
            policy, inputs, lambda: self._plan(spec, policy, argv, loop, temp=space)
        )
        key = (req, loop)
        if again is not None and key == spare.key:
            spare.planned = again
        return key

    def adopt(self, spare: Spare) -> SandlockLaunched:
        """The started run of a spare a run takes (its notes said now)."""
        launched = spare.launched
        assert isinstance(launched, SandlockLaunched)
        if launched.loopback is not None and not LOOPBACKS.hold(launched.loopback, spare.tag):
            raise SpawnError("the project's network namespace was let go")
        self._tell(launched, spare.notes)
        return launched

    def argv_trampoline(self) -> list[str]:
        return [bash_path() or "/bin/bash", "-c", TRAMPOLINE]

    @staticmethod
    def _held(req: dict[str, Any], spec: RunSpec) -> list[str]:
        """Every path a run of ``req`` holds by inode: its Landlock grants, cwd, binds, hidden
        paths and temp dir."""
        kw = req["sandbox"]
        return list(
            dict.fromkeys(
                [
                    spec.cwd,
                    req["tmp"],
                    *kw["fs_readable"],
                    *kw["fs_writable"],
                    *(p for _k, p in req["reexpose"]),
                    *(p for _k, p in req["binds"]),
                    *req["hide"],
                ]
            )
        )


def host_network(policy: Policy) -> bool:
    """True when runs share the host's network: the user configured outside endpoints or local
    ports to reach; otherwise they join run_bash's own loopback-only network namespace."""
    return shares_host_network(policy.network_allow, policy.allow_local_ports)


def shares_host_network(allow: Sequence[str], local_ports: Sequence[int]) -> bool:
    """``host_network`` of the policies of options whose ``network`` has ``allow`` and
    ``allow_local_ports`` (a policy has them as they are)."""
    return bool(allow or local_ports)
