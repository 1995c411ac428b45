"""Launching a run: its policy and the guard of what the host reads from its project (prepared off
the loop), then its temp dir, output file and pipe, its environment, and the backend's spawn; or,
when the project's prepared sandbox fits it exactly (``spares.py``), that sandbox, given the
command."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from run_bash import fsdeps
from run_bash.config import Config
from run_bash.errors import SpawnError
from run_bash.output import Capture, OutputBudget, ReadyFile
from run_bash.sandbox import proc
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.guard import Keeper
from run_bash.sandbox.guardscope import Scope
from run_bash.sandbox.hostread import RulesName
from run_bash.sandbox.policy import Policy, RunEnv, build_policy
from run_bash.sandbox.spare import Spare
from run_bash.sessions.session import Session
from run_bash.sessions.tempspace import TempSpace

if TYPE_CHECKING:
    from run_bash.run_changes import RunChanges
    from run_bash.sessions.spares import Spares

PIPE_SIZE = 1024 * 1024
MEMO_SIZE = 32

# The run's policy, its guard, and the prepared sandbox it takes (None: none of them applies).
Prepared = tuple[Policy | None, Scope | None, Spare | None]


class Launching:
    """Builds and starts the runs of one host. ``report_stop(s)`` tells a run's readers that its
    output file stopped short; ``on_tamper(s)`` kills a run whose guard saw tampering."""

    def __init__(
        self,
        config: Callable[[], Config],
        environ: Mapping[str, str],
        state_dir: str,
        keeper: Keeper,
        temp: TempSpace,
        budget: Callable[[], OutputBudget],
        report_stop: Callable[[Session], None],
        on_tamper: Callable[[Session], None],
        changes: RunChanges | None = None,
        spares: Spares | None = None,
        env: RunEnv | None = None,
    ) -> None:
        self._config = config
        self.environ = environ
        self.state_dir = state_dir
        self.keeper = keeper
        self.temp = temp
        self._budget = budget
        self._report_stop = report_stop
        self._on_tamper = on_tamper
        self.changes = changes
        self.spares = spares
        # CodeCompanion's rules files and per-project config (sent from Lua at setup).
        self.agent_rules: tuple[RulesName, ...] = ()
        self.project_config: tuple[str, ...] = ()
        self._warned: set[str] = set()
        self.ready_file = ReadyFile(state_dir)
        # Policies kept with what computing them read (``policy``).
        self._memo: dict[tuple[object, ...], tuple[Config, Policy, fsdeps.Reads]] = {}
        self._memo_lock = threading.Lock()
        self.env = env if env is not None else RunEnv(environ)  # a run's environment
        # Every directory a policy of this host let runs write to: a run may still be there (in
        # the background), and a file it mapped changes without an inotify event (``fsdeps``).
        self._writable: frozenset[str] = frozenset()
        # Keys being computed: a lock each, how many callers hold or wait for it, and the last
        # policy computed there (for the callers that were waiting while it was).
        self._computing: dict[tuple[object, ...], list[Any]] = {}
        # Kept policies a spare's preparation computed, whose watches it sets once its sandbox
        # is asked for (``arm_kept``).
        self._unarmed: list[fsdeps.Reads] = []

    def policy(
        self, cwd: str, on_stage: Callable[[str], None] | None = None, *, spare: bool = False
    ) -> Policy:
        """The policy of a sandboxed run in ``cwd`` now. Host I/O (git, the project's files):
        never on the loop. Raises on failure.

        Computed again only when something it read changed: the last policy of the same inputs
        is kept with what computing it read (``fsdeps``), and used while that is all still the
        same (stat signatures, and the tree scan's own inotify watches).

        ``spare``: for a prepared sandbox, which runs nothing until a run takes it, and a run
        takes it only when its own policy, computed and checked then, is the very one it was
        built from (``Spares.claim``): a kept policy is taken without looking again (the run
        that comes next looks, and a stale one costs a spare, never a run's sandbox).
        """
        config = self._config()
        # The change store is never reachable from inside, whatever the rules grant.
        hidden = tuple(self.changes.private_paths()) if self.changes is not None else ()
        untrusted = tuple(self.keeper.untrusted())
        key = (cwd, id(config), self.agent_rules, self.project_config, untrusted, hidden)
        hit = self._kept(key, config, not spare)
        if hit is None:
            # One computation per key at a time: a run arriving while its spare's preparation
            # computes the same policy waits for that answer instead of racing it for the GIL,
            # and takes it as it is (gate[2]): computed while it waited, it is as recent as one
            # of its own, so it is not checked again (what a spare holds is checked when a run
            # takes it: ``Spares.claim``). An answer handed on before a caller came is not that
            # caller's: it found the kept one stale, and checks or computes for itself.
            with self._memo_lock:
                gate = self._computing.setdefault(key, [threading.Lock(), 0, None])
                gate[1] += 1
                before = gate[2]
            try:
                with gate[0]:
                    handed = gate[2]
                    hit = handed if handed is not before else self._kept(key, config)
                    if hit is None:
                        return self._compute(key, config, cwd, untrusted, hidden, on_stage, gate)
            finally:
                with self._memo_lock:
                    gate[1] -= 1
                    if not gate[1]:
                        del self._computing[key]
        if on_stage is not None:
            on_stage("hostread")
        return hit

    def _kept(self, key: tuple[object, ...], config: Config, look: bool = True) -> Policy | None:
        """The policy kept for ``key`` while everything computing it read is still the same
        (``look`` false: kept, unchecked; see ``policy``)."""
        with self._memo_lock:
            hit = self._memo.get(key)
        if hit is not None and hit[0] is config and (not look or hit[2].still(self._writable)):
            return hit[1]
        return None

    def _compute(
        self,
        key: tuple[object, ...],
        config: Config,
        cwd: str,
        untrusted: tuple[str, ...],
        hidden: tuple[str, ...],
        on_stage: Callable[[str], None] | None,
        gate: list[Any],
    ) -> Policy:
        """Compute the policy of ``key`` and keep it when what it read held still; a kept one
        is also handed to the callers waiting at ``gate`` (``policy``)."""
        with fsdeps.recording() as reads:
            policy = build_policy(
                config,
                cwd,
                env=self.environ,
                discovery=self.keeper.discovery,
                agent_rules=self.agent_rules,
                project_files=self.project_config,
                untrusted=untrusted,
                hidden=hidden,
                # Which ports other local services listen on is for `python -m run_bash
                # policy` to show; no run's sandbox depends on it (loopback connects are
                # decided when they happen).
                scan_ports=False,
                on_stage=on_stage,
            )
        with self._memo_lock:
            self._writable = self._writable | frozenset(policy.writable)
            keep = reads.usable and reads.settled
            if keep:
                if len(self._memo) >= MEMO_SIZE:
                    self._memo.clear()
                self._memo[key] = (config, policy, reads)
                gate[2] = policy
            else:
                self._memo.pop(key, None)
            if keep and on_stage is None:
                # Computed beside no run (a spare's preparation): the watches that vouch for
                # what it read are set by that preparation once it has asked for its sandbox
                # (``arm_kept``), not by the next run's first look (a few ms of inotify work on
                # a run's path), nor before the sandbox a run may be waiting for; when a run
                # waits for it, by the preparation after that run (``Spares._prepare``). A run
                # that computed its own leaves them to the next look, the preparation after it.
                self._unarmed = [*self._unarmed[-(MEMO_SIZE - 1) :], reads]
        return policy

    def arm_kept(self) -> None:
        """Set the watches of the policies spares' preparations computed (``_compute``), now
        that their sandboxes are asked for. Only a head start: the next check decides, so a
        failure here changes nothing."""
        with self._memo_lock:
            todo, self._unarmed = self._unarmed, []
            writable = self._writable
        for reads in todo:
            if not reads.armed:
                with contextlib.suppress(Exception):
                    reads.still(writable)

    def prepare(self, s: Session) -> Prepared:
        """The run's policy, the guard of what the host reads from its project, and the prepared
        sandbox it takes when one fits exactly (``spares``). Host I/O (git, the project's files):
        never on the loop for a deferred run. Raises on failure."""
        if not s.backend.isolates:
            return None, None, None
        s.mark("prepare")
        if self.spares is not None:
            self.spares.expect(s.cwd)
        policy = self.policy(s.cwd, on_stage=s.mark)
        s.mark("policy")
        assert policy.host_read is not None
        scope = self.keeper.prepare(s.id, policy.host_read, policy.readable)
        s.mark("guard")
        spare = None
        if self.spares is not None:
            try:
                spare = self.spares.claim(s, policy)
                s.mark("claimed")
            except BaseException:
                self.keeper.release(s.id)
                raise
        return policy, scope, spare

    def spawn(self, s: Session, prepared: Prepared) -> None:
        """Build the run's files and environment, and spawn it: ``s`` gets its temp dir, capture,
        pipe (``pipe_r``), launched process and tracker. Raises on failure (nothing is left)."""
        sid = s.id
        s.mark("spawn")
        if self.spares is not None:
            self.spares.commands += 1  # (from now on a process of ours may hold a lease)
        config = self._config()
        out_path = os.path.join(self.state_dir, f"{sid}.log")
        spare = prepared[2]
        try:
            s.capture = Capture(
                out_path,
                config.output.file_cap,
                budget=self._budget(),
                ready=self.ready_file.take(out_path),
            )
            self._report_stop(s)
            if spare is not None and not self._take(s, spare, config):
                spare = None
            if spare is None:
                self._start(s, prepared, config)
        except BaseException:
            self.keeper.release(sid)
            if s.capture:
                s.capture.close()
                s.capture = None
                with contextlib.suppress(OSError):
                    os.unlink(out_path)
            if s.tmpdir:
                shutil.rmtree(s.tmpdir, ignore_errors=True)
            raise
        assert s.launched is not None
        s.tracker = proc.Tracker(s.launched.session_id or sid, s.launched.pid)
        if prepared[1] is not None:
            s.notices.extend(prepared[1].notices)
            prepared[1].attach(lambda: self._on_tamper(s))
        s.notices.extend(s.launched.notices)

    def refill(self) -> None:
        """Make the next run's output file and temp dir ahead of it (a worker; never raises)."""
        self.ready_file.refill()
        self.temp.refill()

    def _dropped(self, s: Session, dropped: list[str]) -> None:
        for name in dropped:
            if name not in self._warned:
                self._warned.add(name)
                s.notices.append(f"environment variable {name} looks secret; not passed")

    def _take(self, s: Session, spare: Spare, config: Config) -> bool:
        """Start ``s`` in its prepared sandbox: the waiting bash gets the command. False when
        the spare is gone (it is discarded; the run starts the usual way)."""
        assert self.spares is not None
        _env, dropped = self.env(config, spare.tmpdir, spare.tag)
        try:
            launched = s.backend.adopt(spare)
        except SpawnError as err:
            self.spares.discard(spare, str(err))
            return False
        try:
            spare.send(s.cmd)
        except OSError as err:
            self.spares.discard(spare, f"it did not take the command ({err.strerror})")
            return False
        self._dropped(s, dropped)
        s.tmpdir = spare.tmpdir
        s.pipe_r, spare.pipe_r = spare.pipe_r, -1
        s.launched = launched
        s.mark("took_spare")
        return True

    def _start(self, s: Session, prepared: Prepared, config: Config) -> None:
        """Start ``s`` the usual way: its temp dir, output pipe, environment and the backend's
        spawn."""
        sid, backend = s.id, s.backend
        self.temp.make(s)
        r = w = -1
        try:
            r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: fewer wake-ups for chatty commands
            # The write end must block: a command writing faster than we read should wait, not fail.
            os.set_blocking(w, True)
            env, dropped = self.env(config, s.tmpdir, sid)
            self._dropped(s, dropped)
            spec = RunSpec(
                cmd=s.cmd,
                cwd=s.cwd,
                env=env,
                stdout_fd=w,
                tmpdir=s.tmpdir,
                session_id=sid,
                policy=prepared[0],
            )
            s.mark("files")
            s.launched = backend.spawn(spec)
            s.mark("spawned")
            for stage, at in s.launched.stages.items():
                s.marks.setdefault(stage, at)
        except BaseException:
            for fd in (r, w):
                if fd >= 0:
                    os.close(fd)
            raise
        os.close(w)
        s.pipe_r = r
