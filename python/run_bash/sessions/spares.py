"""Prepared sandboxes of one host (``sandbox/spare.py``): at most one per project, made before the
project's next run needs it.

When one is made (``want``): as soon as a run has started, when it came back to back with the
run before it (``in_burst``) and the machine has a core free beside the command (``core_free``:
at least two CPUs, and little CPU pressure lately),
so that the next command, however soon it comes, finds its sandbox ready; else beside a run
still going after ``PREPARE_BESIDE_S`` (a build, a server; a short run's is then made after it,
so making it never takes the command's core); when a run ends and its project has none; and
after ``setup()`` for the host's working directory; never while a run holds a file lease (its
policy would read the leased file: ``_make``). A spare made while a run is going may hold
state that run then changes: the check at claim (below) is what guarantees a run gets the
sandbox its policy says now. Making one
computes the policy a run in that directory would get now (``Launching.policy``) and asks the
backend to ``prepare`` it; a newer one replaces the older one of the same project, and at most
``MAX_SPARES`` are kept in all (the oldest go first). Preparing runs on this part's own worker
threads, never on the host loop. Once a spare is ready, the watches that let a run take it without
planning its sandbox again are set (``spare.Planned``), unless a run took it first.

A host's first preparation in a directory, before any command started, is made from the policy
the last host's first run there got (``lastpolicy``: kept in a file, a guess), so that its sandbox
is built while that run computes its own policy. The run's claim checks it as any other;
when no run waits for it, the host computes the policy itself and checks it at once
(``_confirm``), so that a run that comes later finds both ready. Each host's first claim in a
directory keeps its run's policy there for the next host.

Taking one (``claim``, off the loop, after the run's policy and guard): the project's spare, if it
was made for the run's cwd by the backend instance the run uses and the backend says it is exactly
the sandbox this run gets now (``Spare.usable``), from a policy with the same warnings (the
spare's notes tell them to the run); a preparation still running for that cwd is
waited for (it is partly done: waiting costs less than starting anew). A spare that does not match
is discarded, and the run starts the usual way. ``sandbox.prepare = false`` turns all of it off.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from typing import cast

from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.sandbox.base import Backend, RunSpec
from run_bash.sandbox.netholder import project_of
from run_bash.sandbox.policy import Policy, RunEnv
from run_bash.sandbox.proc import descendants, lease_holders
from run_bash.sandbox.spare import Spare, lift, mounts
from run_bash.sessions import lastpolicy
from run_bash.sessions.session import Session, new_id
from run_bash.sessions.tempspace import TempSpace

log = logging.getLogger("run_bash")

# Spares kept at once (one per project).
MAX_SPARES = 4
# How long a run waits for its project's spare that is still being made.
WAIT_S = 5.0
# The size of a spare's output pipe (as a run's: fewer wake-ups for chatty commands).
PIPE_SIZE = 1024 * 1024
F_SETPIPE_SZ = 1031


# A run that starts within this long after the previous run in its directory ended is part of a
# burst (commands back to back): the next sandbox is then made beside it at once (``in_burst``).
BURST_S = 0.05
# The CPU pressure (``/proc/pressure/cpu``, "some avg10": the share of the last 10 s in which some
# thread waited for a CPU, in %) below which a core counts as free beside a command. Commands back
# to back and the spares made beside them alone keep a 2-core machine at 10-13 %; a machine where
# threads queue for the CPUs (a build with more jobs than cores) is far above.
CPU_PRESSURE_FREE = 25.0


def room_beside(cpus: int, runnable: int) -> bool:
    """``core_free``'s rule where the kernel keeps no CPU pressure: at least two CPUs, and no more
    runnable threads right now than CPUs."""
    return cpus >= 2 and runnable <= cpus


def calm(cpus: int, pressure: float) -> bool:
    """``core_free``'s rule: at least two CPUs, and threads seldom waited for one lately."""
    return cpus >= 2 and pressure < CPU_PRESSURE_FREE


def core_free() -> bool:
    """Whether a spare can be made beside a command that has just started without taking that
    command's core, in the kernel's own counts: the CPUs this process may use, and the CPU
    pressure of the last 10 s (``calm``; it counts the spares made beside commands too, so a
    machine they crowd stops getting them), else the runnable threads right now
    (``/proc/loadavg``, ``room_beside``). False when neither can be read."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except OSError:
        cpus = os.cpu_count() or 1
    try:
        with open("/proc/pressure/cpu", "rb") as f:
            some = f.readline().split()
        return calm(cpus, float(dict(kv.split(b"=", 1) for kv in some[1:])[b"avg10"]))
    except (OSError, ValueError, IndexError, KeyError):
        pass
    try:
        with open("/proc/loadavg", "rb") as f:
            runnable = int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return False
    return room_beside(cpus, runnable)


def spare_memory(spare: Spare) -> int:
    """The memory (KiB) a spare's processes hold of their own (private pages: what ending them
    frees): the backend's own processes (sandlock's supervisor is the waiting bash's parent, a
    fork of the launcher) and the waiting bash."""
    pids = [spare.launched.pid, *descendants(spare.launched.pid)]
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open(f"/proc/{spare.launched.pid}/stat") as f,
    ):
        parent = int(f.read().rsplit(")", 1)[1].split()[1])
        if parent != os.getpid():
            pids.append(parent)
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    return total


class Spares:
    """The prepared sandboxes of one host; see the module docstring.

    ``policy(cwd)`` computes the policy of a run in ``cwd`` as ``Launching`` does;
    ``arm_policies()`` sets the watches of the policies computed so (``Launching.arm_kept``),
    called once a preparation has asked for its sandbox.
    """

    def __init__(
        self,
        config: Callable[[], Config],
        environ: Mapping[str, str],
        temp: TempSpace,
        policy: Callable[[str], Policy],
        arm_policies: Callable[[], None] = lambda: None,
        env: RunEnv | None = None,
    ) -> None:
        self._config = config
        self.env = env if env is not None else RunEnv(environ)  # a run's environment
        self.temp = temp
        self._policy = policy
        self._arm_policies = arm_policies
        self._lock = threading.Lock()
        self._ready: dict[str, Spare] = {}  # project -> its spare
        self._pending: dict[str, concurrent.futures.Future[None]] = {}  # cwd -> its preparation
        # Watches set after a preparation (``_arm``, ``_arm_policy``), by what they are for.
        self._arming: dict[str, concurrent.futures.Future[None]] = {}
        # Ready spares whose plan is armed once they have been ready a while (``_arm``): tag ->
        # what tells that work a run took the spare (or it went) before.
        self._taken: dict[str, threading.Event] = {}
        self._works = itertools.count()  # names the policies' arming in ``_arming``
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="run_bash-spare"
        )
        self._closed = False
        self._ended: dict[str, float] = {}  # cwd -> when its last run ended (``in_burst``)
        # Directories whose preparation a run is waiting for or on its way to (``expect``,
        # ``claim``): for the host's first run, that preparation leaves the arming of its
        # policy to the next one (``_prepare``).
        self._awaited: set[str] = set()
        # What health says: the last preparation's failure, and how many runs took a spare.
        self.error = ""
        self.taken = 0
        self.discarded = 0
        # Commands this host started, in or out of a sandbox (``Launching.spawn`` counts them).
        self.commands = 0
        # The policies of the last host's first runs (``lastpolicy``): the file, the directories
        # whose first preparation looked there, and those whose run's policy was noted there.
        # ``guessed``: spares made from one (``Spare.guessed``).
        self.kept_file = lastpolicy.path_of(environ)
        self._looked: set[str] = set()
        self._noted: set[str] = set()
        self.guessed = 0

    # -- state -----------------------------------------------------------------------------------

    def off_because(self, backend: Backend | None = None) -> str:
        """Why no spare is made (for ``backend``): "" when spares are made."""
        if not self._config().sandbox.prepare:
            return "sandbox.prepare = false"
        if backend is not None and not backend.prepares:
            return f"the {backend.name} backend has nothing to prepare"
        if mounts().generation() is None:
            return "the mount table cannot be watched (/proc/self/mountinfo)"
        if self._closed:
            return "the host is exiting"
        return ""

    def describe(self, backend: Backend) -> tuple[bool, str]:
        """Whether spares are made for ``backend`` and a line saying so (for health): how many
        are ready and their memory, or why none are made."""
        why = self.off_because(backend)
        if why:
            return False, f"off: {why}; every sandboxed command builds its sandbox when it starts"
        if not backend.isolates:
            return False, "off: commands run without a sandbox; nothing to prepare"
        ready = self.ready()
        own = sum(spare_memory(sp) for sp in ready)
        text = (
            f"active (sandbox.prepare): {len(ready)} ready ({own / 1024:.1f} MiB of their own), "
            f"{self.taken} run(s) took one, {self.discarded} discarded"
        )
        if self.guessed:
            text += f"; {self.guessed} made from the policy the last host's first run got"
        if self.error:
            text += f"; the last preparation failed: {self.error}"
        return True, text

    def settle(self, timeout: float = WAIT_S) -> bool:
        """Wait (off the loop) until no preparation is running, the arming of a ready spare's
        plan included; whether none is."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = [*self._pending.values(), *self._arming.values()]
            if not pending:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            concurrent.futures.wait(pending, left)

    def ready(self) -> list[Spare]:
        """The spares kept now."""
        with self._lock:
            return list(self._ready.values())

    # -- making ----------------------------------------------------------------------------------

    def ended(self, cwd: str) -> None:
        """A run in ``cwd`` ended now."""
        if len(self._ended) > 256:
            self._ended.clear()
        self._ended[cwd] = time.monotonic()

    def in_burst(self, cwd: str, started: float) -> bool:
        """Whether a run in ``cwd`` that started at ``started`` came within ``BURST_S`` of the end
        of the run before it there (commands back to back): the next one may come as soon, and
        its sandbox is made beside this run at once. An agent's command after a turn of its own
        comes later: the sandbox made after the run is then ready in time, and making it never
        takes a core from the run's own end."""
        last = self._ended.get(cwd)
        return last is not None and started - last <= BURST_S

    def want(self, cwd: str, backend: Backend) -> None:
        """Prepare the sandbox of the next run in ``cwd`` unless one is ready or on its way.
        Returns at once."""
        if self.off_because(backend) or not backend.availability().ok:
            return
        with self._lock:
            if cwd in self._pending:
                return
            if any(sp.cwd == cwd and sp.backend is backend for sp in self._ready.values()):
                return
        # What the sandbox needs whatever its policy says, started on this thread: the worker
        # that makes the sandbox would wait for the interpreter after each of its file system
        # calls while the first command's policy is being computed.
        backend.ready_ahead()
        with self._lock:
            if cwd not in self._pending:
                self._pending[cwd] = self._pool.submit(self._prepare, cwd, backend)

    def _prepare(self, cwd: str, backend: Backend) -> None:
        """Make a spare for ``cwd`` and keep it (a worker thread; never raises)."""
        spare: Spare | None = None
        try:
            spare = self._make(cwd, backend)
        except Exception as err:
            self.error = f"{cwd}: {err}"
            log.debug("could not prepare a sandbox for %s: %s", cwd, err)
        old: list[Spare] = []
        with self._lock:
            if spare is not None:
                if self._closed:
                    old.append(spare)
                else:
                    self.error = ""
                    gone = self._ready.pop(spare.project, None)
                    if gone is not None:
                        old.append(gone)
                    self._ready[spare.project] = spare
                    while len(self._ready) > MAX_SPARES:
                        oldest = min(self._ready, key=lambda k: self._ready[k].made)
                        old.append(self._ready.pop(oldest))
            self._pending.pop(cwd, None)
            # The watches of the policy it computed, if it did, after the sandbox a run may be
            # waiting for (or be on its way to: ``expect``). When that run is the host's first,
            # not now: setting them (4-5 ms of inotify work here, for a host's first policy)
            # would take the interpreter from the first command's start and end, which wait for
            # everything the host does at its start. The run's end asks for its project's next
            # sandbox, whose preparation sets them (``Launching.arm_kept`` arms every policy not
            # yet armed), after its result.
            # (Later runs find them set beside them as before: a run whose policy's watches
            # are not set looks at every path again, and runs back to back would all do so.)
            first = cwd in self._awaited and not self.commands
            self._awaited.discard(cwd)
            guessed = spare if spare is not None and spare.guessed else None
            if not first:
                with contextlib.suppress(RuntimeError):  # the pool is shut down
                    work = f"policy {next(self._works)}"
                    # A spare made from a kept policy: the policy a run gets now is computed
                    # and the spare checked against it first (``_confirm``), which arms it.
                    if guessed is not None and guessed not in old:
                        job = self._pool.submit(self._confirm, work, guessed, backend)
                    else:
                        job = self._pool.submit(self._arm_policy, work)
                    self._arming[work] = job
            if spare is not None and spare.planned is not None and spare not in old:
                taken = self._taken[spare.tag] = threading.Event()
                with contextlib.suppress(RuntimeError):  # the pool is shut down
                    self._arming[spare.tag] = self._pool.submit(self._arm, spare, taken)
        for o in old:
            self._discard(o, "replaced")

    def _arm(self, spare: Spare, taken: threading.Event) -> None:
        """Arm the plan of a spare (``Planned.arm``) once it has been ready for ``BURST_S``
        without a run taking it (a worker thread; never raises). A run that comes at once
        (commands back to back) looks at what planning read once instead, which costs less than
        arming; one that comes later finds the plan armed."""
        try:
            planned = spare.planned
            if not taken.wait(BURST_S) and planned is not None and not planned.arm():
                spare.planned = None
        except Exception as err:
            log.debug("could not arm the plan of prepared sandbox %s: %s", spare.tag, err)
        finally:
            with self._lock:
                self._arming.pop(spare.tag, None)
                self._taken.pop(spare.tag, None)

    def _confirm(self, work: str, spare: Spare, backend: Backend) -> None:
        """For a spare made from a kept policy (``_guess``) that no run waits for: compute the
        policy a run in its directory gets now and check the spare against it (a worker thread;
        never raises). A run that comes later then finds both ready, as after a usual
        preparation: the policy kept with its watches set, the spare's plan made from it
        (``spare_key``). One that does not fit goes, and the usual one is made."""
        try:
            try:
                policy = self._policy(spare.cwd)
            except Exception as err:
                why = f"no policy can be computed now ({err})"
            else:
                why = self._mismatch(spare, spare.cwd, policy, keep=True)
                self._arm_policies()
            if why:
                with self._lock:
                    mine = self._ready.get(spare.project) is spare
                    if mine:
                        del self._ready[spare.project]
                if mine:  # (else a run took it, and checked it itself)
                    self._discard(spare, why)
                    self.want(spare.cwd, backend)
        except Exception as err:
            log.debug("could not check the prepared sandbox %s: %s", spare.tag, err)
        finally:
            with self._lock:
                self._arming.pop(work, None)

    def _arm_policy(self, work: str) -> None:
        """``arm_policies`` on a worker thread; never raises."""
        try:
            self._arm_policies()
        except Exception as err:
            log.debug("could not arm the kept policies: %s", err)
        finally:
            with self._lock:
                self._arming.pop(work, None)

    def _gone(self, spare: Spare) -> None:
        """A spare was taken or let go: its plan is armed no more (under ``_lock``)."""
        taken = self._taken.get(spare.tag)
        if taken is not None:
            taken.set()

    def _make(self, cwd: str, backend: Backend) -> Spare:
        config = self._config()
        # Until a command has started, no process of ours can hold a lease: reading
        # /proc/locks (which waits for the kernel, 4-13 ms) is left out of a host's first
        # sandbox, which its first command waits for.
        held = lease_holders() if self.commands else set()
        if held and held.intersection(descendants(os.getpid())):
            # Computing the policy reads the project's files (git reads its config): an open
            # breaks the lease, which is for the next run's own post-run check to judge.
            raise SpawnError(
                "a running command holds a file lease, which reading the project ahead of a run "
                "would break; no sandbox is made ahead until it is let go"
            )
        guess = self._guess(cwd)
        if guess is not None:
            # Built from the last host's policy while the first run computes its own; that run
            # takes it only if its own policy plans the same sandbox (``claim``).
            try:
                spare = self._build(cwd, backend, config, guess)
            except Exception as err:
                log.debug("no sandbox from the kept policy of %s: %s", cwd, err)
            else:
                spare.guessed = True
                with self._lock:
                    self.guessed += 1
                return spare
        return self._build(cwd, backend, config, self._policy(cwd))

    def _guess(self, cwd: str) -> Policy | None:
        """The policy the last host's first run in ``cwd`` got (``lastpolicy``), for this
        host's first preparation there before any command started; else None."""
        with self._lock:
            if self.kept_file is None or self.commands or cwd in self._looked:
                return None
            self._looked.add(cwd)
        return lastpolicy.load(self.kept_file, cwd)

    def _build(self, cwd: str, backend: Backend, config: Config, policy: Policy) -> Spare:
        """Ask ``backend`` for the sandbox of a run of ``policy`` in ``cwd``."""
        tag = "spare" + new_id({})
        tmpdir = self.temp.make_dir(tag)
        fds: list[int] = []
        try:
            out_r, out_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            fds += [out_r, out_w]
            with contextlib.suppress(OSError):
                fcntl.fcntl(out_w, F_SETPIPE_SZ, PIPE_SIZE)
            os.set_blocking(out_w, True)  # a command writing faster than we read waits
            cmd_r, cmd_w = os.pipe2(os.O_CLOEXEC)
            fds += [cmd_r, cmd_w]
            env, _dropped = self.env(config, tmpdir, tag)
            spec = RunSpec(
                cmd="",
                cwd=cwd,
                env=env,
                stdout_fd=out_w,
                tmpdir=tmpdir,
                session_id=tag,
                policy=policy,
                stdin_fd=cmd_r,
                prepared=True,
            )
            spare = backend.prepare(spec)
        except BaseException:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        os.close(out_w)
        os.close(cmd_r)
        out_r, cmd_w = lift(out_r), lift(cmd_w)
        spare.tmpdir, spare.pipe_r, spare.cmd_w = tmpdir, out_r, cmd_w
        spare.project = project_of(policy)
        spare.warnings = tuple(policy.warnings)
        return spare

    # -- taking ----------------------------------------------------------------------------------

    def expect(self, cwd: str) -> None:
        """A run in ``cwd`` is being prepared: when the sandbox being made for it is done before
        the run asks for it, it still waits for it (the host's first run leaves that sandbox's
        policy watches until after its result: ``_prepare``)."""
        with self._lock:
            if cwd in self._pending:
                self._awaited.add(cwd)

    def claim(self, s: Session, policy: Policy) -> Spare | None:
        """The spare run ``s`` (its policy computed now) can use, taken out of the pool; None
        when there is none that fits exactly (a spare that does not is discarded). Blocks on
        the project's files: never on the loop."""
        if self._closed or not self._config().sandbox.prepare:
            return None
        with self._lock:
            pending = self._pending.get(s.cwd)
            if pending is not None:
                self._awaited.add(s.cwd)
            note = self.kept_file is not None and s.cwd not in self._noted
            self._noted.add(s.cwd)
        if note:  # for the next host's first sandbox here (``lastpolicy``), off the run's way
            with contextlib.suppress(RuntimeError):  # the pool is shut down
                self._pool.submit(self._note, s.cwd, policy)
        if pending is not None:
            with contextlib.suppress(Exception):
                pending.result(WAIT_S)
        project = project_of(policy)
        with self._lock:
            # A spare made from a kept policy (``_guess``) for another project than the one the
            # run's own policy names now would never be taken: it goes.
            astray = [
                k
                for k, sp in self._ready.items()
                if k != project and sp.cwd == s.cwd and sp.guessed
            ]
            gone = [self._ready.pop(k) for k in astray]
            spare = self._take(project, s)
        for sp in gone:
            self._discard(sp, "made for another project than the run's")
        if spare is None:
            return None
        why = self.mismatch(spare, s, policy)
        if why:
            self._discard(spare, why)
            return None
        self.taken += 1
        return spare

    def _note(self, cwd: str, policy: Policy) -> None:
        """``lastpolicy.note`` on a worker thread; never raises."""
        try:
            lastpolicy.note(self.kept_file, cwd, policy)
        except Exception as err:
            log.debug("could not keep the policy of %s: %s", cwd, err)

    def _take(self, project: str, s: Session) -> Spare | None:
        """The project's spare, out of the pool, when it is for run ``s`` (under ``_lock``)."""
        spare = self._ready.get(project)
        if spare is None or spare.cwd != s.cwd or spare.backend is not s.backend:
            return None
        if not spare.fits(s.cmd):
            return None  # kept for the next run; this one starts the usual way
        del self._ready[project]
        self._gone(spare)
        return spare

    def mismatch(self, spare: Spare, s: Session, policy: Policy) -> str:
        """Why ``spare`` is not exactly the sandbox run ``s`` gets now ("" when it is)."""
        return self._mismatch(spare, s.cwd, policy)

    def _mismatch(self, spare: Spare, cwd: str, policy: Policy, keep: bool = False) -> str:
        """Why ``spare`` is not exactly the sandbox a run in ``cwd`` of ``policy`` gets now
        (``keep``: as ``Backend.spare_key``)."""
        if spare.warnings != tuple(policy.warnings):
            return "the run's policy warns of other things now"  # (what the spare would say)
        env, _dropped = self.env(self._config(), spare.tmpdir, spare.tag)
        spec = RunSpec(
            cmd="",
            cwd=cwd,
            env=env,
            stdout_fd=-1,
            tmpdir=spare.tmpdir,
            session_id=spare.tag,
            policy=policy,
        )
        backend = cast(Backend, spare.backend)  # (a run's own backend: ``_take``)
        try:
            key = backend.spare_key(spare, spec, keep)
        except Exception as err:
            return f"its sandbox cannot be computed now ({err})"
        if key != spare.key:
            return "a run gets another sandbox now"
        return spare.stale()

    # -- letting go ------------------------------------------------------------------------------

    def discard(self, spare: Spare, why: str) -> None:
        """Let go of a spare taken but not used (killed, its resources released: off the loop)."""
        self._discard(spare, why)

    def _discard(self, spare: Spare, why: str) -> None:
        with self._lock:
            self._gone(spare)
        self.discarded += 1
        log.debug("prepared sandbox %s for %s discarded: %s", spare.tag, spare.cwd, why)
        spare.close_pipes()
        with contextlib.suppress(Exception):
            spare.launched.kill_all()
        try:
            self._pool.submit(self._release, spare)
        except RuntimeError:  # the pool is shut down: the host is exiting
            self._release(spare)

    @staticmethod
    def _release(spare: Spare) -> None:
        with contextlib.suppress(Exception):
            spare.launched.close()
        shutil.rmtree(spare.tmpdir, ignore_errors=True)

    def clear(self, why: str = "the configuration changed") -> None:
        """Discard every spare (a new configuration makes new backends)."""
        with self._lock:
            spares, self._ready = list(self._ready.values()), {}
        for spare in spares:
            self._discard(spare, why)

    def close(self) -> None:
        """Kill every spare now (the host is exiting); preparations still running discard what
        they make."""
        with self._lock:
            self._closed = True
            spares, self._ready = list(self._ready.values()), {}
            for taken in self._taken.values():
                taken.set()
        for spare in spares:
            spare.close_pipes()
            with contextlib.suppress(Exception):
                spare.launched.kill_all()
        deadline = time.monotonic() + 1.0
        for spare in spares:
            if time.monotonic() < deadline:
                self._release(spare)
        self._pool.shutdown(wait=False)
