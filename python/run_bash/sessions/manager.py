"""The session manager: every session of one host, composed of the parts that each own a concern.

Plain asyncio, no Neovim: the host adapter forwards ``on_event`` calls to Neovim. Every public method
that is not a coroutine returns at once. API::

    mgr = SessionManager(config, loop=loop, on_event=lambda name, payload: ...)
    s = mgr.start("make test", cwd="/proj", timeout=300, bg_after=0)     # raises RunBashError
    result = await mgr.wait_result(s.id)   # fg: after exit; bg: after bg_after s or exit
    await mgr.kill(s.id); mgr.output(s.id, tail=50); mgr.list(); await mgr.shutdown()
    page = await mgr.wait(s.id, wait_for="ready", timeout=30)   # a match, the exit, or the timeout

The parts: ``launching`` (policy, guard, files, spawn), ``tempspace`` (the run temp dirs),
``streaming`` (the capture path and live output), ``waiters`` (readiness and ``wait``),
``retention`` (history, pins, the output budget) and ``forwarding`` (session servers to the host).
This module keeps a run's life: start, approval holds, exit, timeout, kill, results and shutdown.

Results are the dataclasses of ``results.py`` (``to_wire()`` gives the plain data Lua receives).
Events (``on_event(name, payload)``): ``started`` (SessionInfo), ``output`` (OutputChunk, throttled,
only for live sessions), ``result`` (RunResult, exactly once per run), ``exited`` (SessionEnd, when
a session that already reported ends, with its last lines of output), ``forgotten``.

With a ``changes`` hook (``run_changes.RunChanges``), each run's project is snapshotted before
its command is spawned and its change set recorded when it ends, before its final result is sent.

Completion is the exit of the command's root process, never pipe EOF. When the root exits, processes it
left behind (``cmd &``, ``setsid``, double forks) are stopped: TERM, KILL after ``KILL_GRACE_S``; the
result says how many. Use ``bg_after`` to keep a server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from run_bash.boundary import working_dir
from run_bash.config import Config, describe
from run_bash.errors import RunBashError, SessionError, SpawnError, UsageError
from run_bash.output import READ_PAGE_BYTES, Capture, OutputBudget, last_lines
from run_bash.results import (
    LiveStart,
    OutputPage,
    RunResult,
    SessionEnd,
    SessionInfo,
    WaitResult,
    Wire,
)
from run_bash.sandbox import proc
from run_bash.sandbox.base import Backend, Choice, Launched, choose_backend, get_backend
from run_bash.sandbox.guard import Keeper
from run_bash.sandbox.guardscope import quarantine_dir
from run_bash.sandbox.hostread import RulesName
from run_bash.sandbox.policy import RunEnv
from run_bash.sessions.forwarding import Forwarding
from run_bash.sessions.launching import Launching, Prepared
from run_bash.sessions.retention import Retention
from run_bash.sessions.session import Session, new_id, ready_pattern, validate_request
from run_bash.sessions.spares import Spares, core_free
from run_bash.sessions.streaming import Streams
from run_bash.sessions.tempspace import TempSpace
from run_bash.sessions.waiters import Waiters
from run_bash.statedir import make_state_dir

if TYPE_CHECKING:
    from run_bash.run_changes import CoverSpec, RunChanges

KILL_GRACE_S = proc.KILL_GRACE_S
# Rounds of listing and signalling a run's tree again after the guard stopped it (``_kill_now``).
KILL_ROUNDS = 20
DRAIN_GRACE_S = 0.3
# How long a run runs before the next command's sandbox is made beside it (``spares``).
PREPARE_BESIDE_S = 0.25
_WALL = 0x40000000  # waitid: children of any exit signal (Linux's __WALL)

log = logging.getLogger("run_bash")

EventSink = Callable[[str, Wire], None]


def _remove(path: str, removed: threading.Event) -> None:
    """Remove a run's temp dir (a worker); ``removed`` is set however it goes."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        removed.set()


class SessionManager:
    """Owns every session of one host; see the module docstring."""

    def __init__(
        self,
        config: Config,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        on_event: EventSink | None = None,
        state_dir: str | None = None,
        environ: Mapping[str, str] | None = None,
        changes: RunChanges | None = None,
        temp_root: str | None = None,
    ) -> None:
        self.config = config
        self.changes = changes
        self.closing = False
        # Called with a run that must wait for the user after all (``start(cover=…)``).
        self.on_hold: Callable[[Session], None] = lambda s: None
        self.loop = loop or asyncio.get_event_loop()
        self.on_event = on_event or (lambda _name, _payload: None)
        self.environ = dict(os.environ if environ is None else environ)
        self.state_dir = state_dir or make_state_dir(environ=self.environ)
        self.sessions: dict[str, Session] = {}
        # Keeps what the host reads from the projects (guard.py).
        self.keeper = Keeper(quarantine_dir(self.environ))
        self._backends: dict[str, Backend] = {}
        self.subreaper = proc.set_child_subreaper()

        def current() -> Config:
            return self.config

        self.temp = TempSpace(self.environ, temp_root)
        self.retention = Retention(
            self.sessions, current, self.state_dir, self._emit, self.change_set_kept
        )
        self.streams = Streams(self.loop, current, self._emit, self._match)
        self.waiters = Waiters(self.loop, self.streams, self._send_result)
        self.forwarding = Forwarding(self.loop, self.sessions, current)
        env = RunEnv(self.environ)  # runs' environments, the prepared sandboxes' too
        self.spares = Spares(
            current,
            self.environ,
            self.temp,
            lambda cwd: self.launching.policy(cwd, spare=True),
            lambda: self.launching.arm_kept(),
            env,
        )
        self.launching = Launching(
            current,
            self.environ,
            self.state_dir,
            self.keeper,
            self.temp,
            lambda: self.retention.budget,
            self.streams.report_stop,
            lambda s: self._kill_now(s, force=True),
            changes,
            self.spares,
            env,
        )

    def _emit(self, name: str, payload: Wire) -> None:
        self.on_event(name, payload)

    def _match(self, s: Session, data: bytes) -> None:
        self.waiters.match(s, data)

    @property
    def budget(self) -> OutputBudget:
        """What all output files may hold together (``Retention.budget``)."""
        return self.retention.budget

    @property
    def temp_root(self) -> str:
        """The directory holding the run temp dirs (created on first use)."""
        return self.temp.root

    @property
    def agent_rules(self) -> tuple[RulesName, ...]:
        """CodeCompanion's rules files (sent from Lua at setup)."""
        return self.launching.agent_rules

    @agent_rules.setter
    def agent_rules(self, value: tuple[RulesName, ...]) -> None:
        self.launching.agent_rules = value

    @property
    def project_config(self) -> tuple[str, ...]:
        """CodeCompanion's per-project config files (sent from Lua at setup)."""
        return self.launching.project_config

    @project_config.setter
    def project_config(self, value: tuple[str, ...]) -> None:
        self.launching.project_config = value

    # -- backends ----------------------------------------------------------------------------------

    def configure(self, config: Config) -> None:
        """Use ``config`` from now on (runs already started keep theirs; prepared sandboxes go)."""
        self.config = config
        self._backends.clear()
        self.spares.clear()

    def prepare_for(self, cwd: str) -> None:
        """Prepare for a first run in ``cwd``: its sandbox (``spares``) and its project's undo
        index (the gate can then say at once whether undo covers the first command, and its
        snapshot is not a walk of the whole project). Returns at once."""
        if self.closing:
            return
        with contextlib.suppress(RunBashError):
            backend, _why = self.resolve_backend()
            if backend.isolates:
                self.spares.want(cwd, backend)
        if self.changes is not None:
            self.changes.warm(cwd)

    def backend(self, name: str) -> Backend:
        """The backend instance ``name`` (created once)."""
        if name not in self._backends:
            self._backends[name] = get_backend(name, self.config)
        return self._backends[name]

    def choice(self, requested: str | None = None) -> Choice:
        """The backend a run would use (``sandbox.backend``, "auto" resolved) and why."""
        return choose_backend(requested or self.config.sandbox.backend, self.backend)

    def resolve_backend(self, requested: str | None = None) -> tuple[Backend, str]:
        """The backend a run would use and, when it runs without the sandbox it wanted, why.
        Raises SpawnError when ``sandbox.backend`` names a backend that is unavailable."""
        chosen = self.choice(requested)
        if chosen.error:
            raise SpawnError(chosen.error)
        return chosen.backend, chosen.unavailable

    # -- start -------------------------------------------------------------------------------------
    def start(
        self,
        cmd: object,
        *,
        cwd: object = None,
        timeout: object = None,
        bg_after: object = 0,
        skip_sandbox: bool = False,
        unsandboxed_ok: bool = False,
        live: bool = False,
        defer: bool = False,
        hold: bool = False,
        sid: str | None = None,
        wait_for: object = None,
        cover: CoverSpec | None = None,
        marks: Mapping[str, float] | None = None,
        opened: Callable[[Session], None] | None = None,
    ) -> Session:
        """Start ``cmd``. Runs without a sandbox only when ``unsandboxed_ok`` (the user approved).

        Arguments are validated at once (errors raise). With ``defer`` the sandbox is built and the
        command spawned off the loop, so an RPC handler returns without waiting for it; a failure
        then becomes the session's result (``error``) instead of an exception. A deferred run with
        nothing to build or snapshot first (no sandbox, undo not recording) starts at once, its
        failure a result all the same. ``opened``: called with the new session before anything of
        it starts (the caller's journal of the run). With
        ``hold`` nothing starts: the session waits for the user's decision (``release`` or
        ``refuse``). ``sid``: the id to use (the gate's decision id), else a new one. A run whose
        changes are recorded is always deferred: its project is snapshotted first, off the loop.
        ``wait_for``: a background run's result comes as soon as a line of output matches it.
        ``cover``: the gate let it through because undo covers it; the snapshot taken before it
        starts checks that again, and the run is held for the user (``on_hold``) if not.
        ``marks``: the stages the request went through before it came here (``Session.marks``).
        """
        text, timeout_s, bg_s, timeout_given = validate_request(
            cmd, timeout, bg_after, float(self.config.default_timeout)
        )
        ready = ready_pattern(wait_for, bg_s)
        backend, why = self.resolve_backend("none" if skip_sandbox else None)
        cwd = working_dir(cwd, confined=backend.isolates)
        if bg_s > 0:
            limit = self.config.sessions.max_background
            live_bg = sum(1 for s in self.sessions.values() if s.running and s.background)
            if live_bg >= limit:
                raise UsageError(
                    f"{live_bg} background sessions are running (limit {limit}); "
                    "kill one first (action=kill)"
                )
        if not backend.isolates and not unsandboxed_ok and not hold:
            reason = why or "the sandbox is off"
            raise SpawnError(f"{reason}; running without a sandbox needs the user's approval")

        if sid is None or sid in self.sessions:
            sid = new_id(self.sessions)
        s = Session(sid, text, cwd, backend, bg_s)
        s.marks.update(marks or {})
        s.mark("queued")
        s.live = live
        s.cover = cover
        s.timeout_s, s.timeout_given = timeout_s, timeout_given
        s.result_future = self.loop.create_future()
        if ready is not None:
            self.waiters.watch_readiness(s, ready)
        if why:
            s.notices.append(why)
        self.sessions[sid] = s
        if hold:
            s.status = "awaiting_approval"
            return s
        if opened is not None:
            try:
                opened(s)
            except BaseException:
                del self.sessions[sid]
                raise
        recording = self.changes is not None and self.changes.recording
        if cover is not None or recording or (defer and backend.isolates):
            self._launch_soon(s)
            return s
        if defer:  # nothing to do off the loop first: a hop to a task would only add its latency
            self._launch_now(s)
            return s
        try:
            self._launch(s, self.launching.prepare(s))
        except BaseException:
            del self.sessions[sid]
            raise
        return s

    def release(self, sid: object) -> bool:
        """The user approved a held session: start it (deferred). False when nothing was held."""
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None or s.status != "awaiting_approval":
            return False
        s.status = "running"
        s.hold = None
        s.started_at, s.started_mono = time.time(), time.monotonic()
        self._launch_soon(s)
        return True

    def refuse(self, sid: object, decision: str, reason: str | None = None) -> bool:
        """The user rejected (or cancelled) a held session: it never starts and is forgotten; its
        result says so. False when nothing was held."""
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None or s.status != "awaiting_approval":
            return False
        if decision == "reject":
            s.status = "rejected"
            s.error = "the user rejected the command; nothing ran" + (
                f" (reason: {reason})" if reason else ""
            )
        else:
            s.status = "cancelled"
            s.error = "the user cancelled the command; nothing ran"
        s.ended_mono = time.monotonic()
        self._send_result(s)
        s.done.set()
        del self.sessions[s.id]
        return True

    def _launch_soon(self, s: Session) -> None:
        early: asyncio.Future[Prepared] | None = None
        if s.backend.isolates and s.cover is None and not self.closing:
            # Nothing the snapshot could make a reason to ask: the snapshot (with undo on), then
            # the policy, the guard and the prepared sandbox's claim, in that order on one worker
            # that starts now, while the caller (an RPC handler) still answers.
            early = self.loop.run_in_executor(None, self._snapshot_and_prepare, s)
        self.loop.create_task(self._launch_deferred(s, early))

    def _snapshot_and_prepare(self, s: Session) -> Prepared:
        """``_launch_deferred``'s work off the loop, for a run not covered by undo (a worker)."""
        if self.changes is not None and not s.killed:
            self.changes.begin_here(s)
            s.mark("snapshot")
        return self.launching.prepare(s)

    async def _launch_deferred(
        self, s: Session, early: asyncio.Future[Prepared] | None = None
    ) -> None:
        """Deferred launch: the project's snapshot first, then the policy and the guard (they read
        files a sandbox can touch), both off the loop; then the spawn. A failure becomes the
        session's result instead of an exception. ``early``: both, started already
        (``_launch_soon``)."""
        if early is None:
            if self.changes is not None and not s.killed:
                await self.changes.begin(s)
                s.mark("snapshot")
            elif s.cover is not None:
                s.cover, s.hold = None, "undo is off"
            if s.hold is not None and not s.killed and not self.closing:
                # Undo does not cover what the gate let through on that ground: ask after all.
                s.status = "awaiting_approval"
                self.on_hold(s)
                return
        if self.closing:
            s.killed = True
        await self._prepare_and_launch(s, early)
        if s.launched is None and self.changes is not None:
            await self.changes.abandon(s)

    async def _prepare_and_launch(
        self, s: Session, early: asyncio.Future[Prepared] | None = None
    ) -> None:
        """``early``: its preparation, started already (``_launch_soon``)."""
        try:
            if early is not None:
                prepared = await early  # what it took is let go below when it was killed since
            elif s.killed:
                raise SessionError("killed before it started; nothing ran")
            elif s.backend.isolates:
                prepared = await self.loop.run_in_executor(None, self.launching.prepare, s)
            else:
                prepared = None, None, None  # nothing to prepare: start on this tick, as before
            if s.killed or self.closing:
                self.keeper.release(s.id)
                if prepared[2] is not None:
                    self.spares.discard(prepared[2], "its run was killed before it started")
                raise SessionError("killed before it started; nothing ran")
            self._launch(s, prepared)
        except Exception as err:
            self._not_started(s, err)

    def _launch_now(self, s: Session) -> None:
        """Start a deferred run that needs nothing built off the loop (no sandbox to prepare,
        no snapshot), on this tick; a failure becomes its result, as for any deferred run."""
        try:
            if self.closing:
                raise SessionError("killed before it started; nothing ran")
            self._launch(s, (None, None, None))
        except Exception as err:
            self._not_started(s, err)

    def _not_started(self, s: Session, err: Exception) -> None:
        """A deferred run could not start: ``err`` is its result."""
        if not isinstance(err, RunBashError):
            log.exception("could not start session %s", s.id)
        s.status = "killed" if s.killed else "failed"
        s.error = str(err) if isinstance(err, RunBashError) else f"internal error: {err}"
        s.ended_mono = time.monotonic()
        self._send_result(s)
        s.done.set()
        self.prune()

    def _launch(self, s: Session, prepared: Prepared) -> None:
        """Spawn the run (``Launching.spawn``) and watch it: its pipe, its exit, its timers."""
        self.launching.spawn(s, prepared)
        self.loop.add_reader(s.pipe_r, self.streams.on_readable, s)
        assert s.launched is not None
        try:
            s.pidfd = s.launched.pidfd()
        except ProcessLookupError:
            s.pidfd = -1
        if s.pidfd >= 0:
            self.loop.add_reader(s.pidfd, self._on_pidfd, s)
        else:
            self.loop.call_soon(self._on_root_exit, s)
        if not s.background or s.timeout_given:
            s.timers.append(self.loop.call_later(s.timeout_s, self._on_timeout, s))
        if s.backend.isolates:
            # The next command's sandbox is made beside this one at once when a core is free
            # (the next command may come as soon as this one ends); else beside a command still
            # running after a moment (a build, a server), and a short one's after it ends, so
            # that making it never takes a core from the command itself.
            if self.spares.in_burst(s.cwd, s.started_mono) and core_free():
                s.mark("beside")
                self.loop.call_soon(self._prepare_beside, s)
            else:
                s.timers.append(self.loop.call_later(PREPARE_BESIDE_S, self._prepare_beside, s))
        if s.background:
            s.timers.append(self.loop.call_later(s.bg_after, self._send_result, s))
        log.debug(
            "started %s pid=%s backend=%s cwd=%s cmd=%r",
            s.id,
            s.launched.pid,
            s.backend.name,
            s.cwd,
            s.cmd,
        )
        # Spawned this instant: nothing of it listens yet (listing ports reads every process of
        # the host and /proc/net; the sessions list and later events say what it listens on).
        self.on_event("started", s.info(ports=False))
        self.forwarding.update(later=True)

    # -- exit, timeout, kill -----------------------------------------------------------------------

    def _prepare_beside(self, s: Session) -> None:
        if s.running and not self.closing:
            self.spares.want(s.cwd, s.backend)

    def _on_pidfd(self, s: Session) -> None:
        self.loop.remove_reader(s.pidfd)
        os.close(s.pidfd)
        s.pidfd = -1
        self._on_root_exit(s)

    def _on_root_exit(self, s: Session) -> None:
        s.mark("exit")
        self.loop.create_task(self._finish(s))

    async def _finish(self, s: Session) -> None:
        assert s.launched is not None and s.tracker is not None
        # The root's exit was seen: a backend that has its status at hand answers at once.
        status = s.launched.reaped()
        if status is None:
            status = await self.loop.run_in_executor(None, s.launched.reap)
        s.mark("reaped")
        s.ended_mono = time.monotonic()
        if status is not None and status < 0:
            s.signal = -status
            s.exit_code = 128 - status
        else:
            s.exit_code = status
        if s.timed_out:
            s.exit_code = 124  # the convention of timeout(1), which agents and scripts know
        for t in s.timers:
            t.cancel()
        s.timers.clear()
        # Stop what the command left behind, then read what it wrote before the pipe closes.
        n = await self._sweep(s)
        s.mark("swept")
        if n and not s.killed and not s.timed_out:
            s.leftovers = n
        if s.pipe_r >= 0 and not s.pipe_eof.is_set():
            self.streams.on_readable(s)  # what is in the pipe, and its end when it came
        try:
            if not s.pipe_eof.is_set():
                await asyncio.wait_for(s.pipe_eof.wait(), DRAIN_GRACE_S)
        except asyncio.TimeoutError:
            if s.pipe_r >= 0:
                self.streams.on_readable(s)
            self.streams.close_pipe(s)
        if s.live_timer is not None:
            s.live_timer.cancel()
            s.live_timer = None
        if s.live:
            self.streams.flush_live(s)
        assert s.capture is not None
        s.capture.close(later=True)  # its reserved space: given back after the result
        out_cfg = self.config.output
        s.capture.freeze(out_cfg.max_chars, out_cfg.max_line_chars)
        s.mark("drained")
        launched = s.launched
        # Nothing of the run may outlive this point: what is left in its cgroup is killed now,
        # before the post-run check. What it held is let go on workers once its result is sent
        # (its cgroup once empty, its supervisor's exit, its network namespace, its temp dir),
        # except the temp dir of a recorded run: removed beside the post-run check (which never
        # reads it), before the change set is taken.
        if not launched.kill_remaining(timeout=0.0):  # the loop never waits for an exit
            await self.loop.run_in_executor(None, launched.kill_remaining)
        recorded = s.change_token is not None
        removing: asyncio.Future[None] | None = None
        removed: threading.Event | None = None
        if recorded:  # its change set must not see the run's temp dir
            removed = threading.Event()
            removing = self.loop.run_in_executor(None, _remove, s.tmpdir, removed)
        # What the host reads from the project is checked now that nothing of the run is left,
        # then what the run changed is recorded, on one worker.
        text = s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars)
        if self.keeper.guards(s.id) or recorded:
            kept = await self.loop.run_in_executor(None, self._check_and_record, s, text, removed)
        else:
            kept = []
            s.mark("checked")
        if s.timed_out:
            s.status = "timed_out"
        elif s.killed:
            s.status = "killed"
        else:
            s.status = "exited"
        if removing is not None:
            await removing
        # The result says how the run ended; what it held is let go by the time it is done
        # (``done``: ``kill`` and the host's end wait for that).
        launched.ended()
        for notice in [*launched.notices, *kept]:
            if notice not in s.notices:
                s.notices.append(notice)
        # A finished session is kept (sessions.keep_finished) as its summary and text only: the
        # backend's objects (a sandbox, its guard's snapshots) go now.
        s.root_pid, s.launched = launched.pid, None
        self.waiters.settle_all(s)
        log.debug(
            "ended %s status=%s exit=%s duration=%.3fs bytes=%d leftovers=%d",
            s.id,
            s.status,
            s.exit_code,
            s.duration_s,
            s.capture.total,
            s.leftovers,
        )
        self.forwarding.update()  # its forwards go with it
        self.spares.ended(s.cwd)
        was_sent = s.result_sent
        self._send_result(s)
        if s.backend.isolates and not self.closing:
            # Asked for as soon as the result is on its way (making it must not delay that),
            # before the run's clean-up: the next command may come at once, and then finds the
            # sandbox made for it (or on its way), not the usual start.
            self.spares.want(s.cwd, s.backend)
        if was_sent:
            self.on_event("exited", self._ended(s))
        # What it held goes once the result is on its way: a worker doing it meanwhile would
        # take the interpreter lock from the result's path on every system call of that path.
        # (Its temp dir on the same worker, unless it is gone already: one hop fewer.)
        tmpdir = s.tmpdir if removing is None else None
        await self.loop.run_in_executor(None, self._let_go, launched, s.capture, tmpdir)
        if removing is not None:
            await removing
        self._reap_strays()  # orphans of runs that exited (this process is their subreaper)
        if recorded and self.changes is not None:
            await self.changes.refresh_kept()  # before ``prune`` asks ``is_kept``
        s.mark("closed")
        s.done.set()
        self.prune()

    def _check_and_record(
        self, s: Session, text: str, removed: threading.Event | None
    ) -> list[str]:
        """The post-run check of the files the host reads (``Keeper.finish``), then the run's
        change set once its temp dir is gone (``removed``); a worker. The check's notices."""
        kept = self.keeper.finish(s.id, text, s.exit_code) if self.keeper.guards(s.id) else []
        s.mark("checked")
        # Post-run checks that put project files back (the guard's restore of protected files)
        # belong above this line: the change set must show the project as the run left it.
        if removed is not None and self.changes is not None:
            removed.wait()
            self.changes.finish_here(s)
            s.mark("changes")
        return kept

    def _let_go(self, launched: Launched, capture: Capture, tmpdir: str | None) -> None:
        """After an ended run's result (a worker thread; never raises): let go of what its
        backend held and of its output file's reserved space, make the next run's output file
        and temp dir ahead of it, then remove the run's temp dir (``tmpdir``, when given)."""
        with contextlib.suppress(Exception):
            launched.close()
        with contextlib.suppress(OSError):
            capture.release()
        if not self.closing:
            self.launching.refill()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)

    async def _sweep(self, s: Session) -> int:
        """TERM the run's remaining processes, KILL after the grace; return how many there were."""
        assert s.tracker is not None and s.launched is not None
        # Other runs' roots, still running (an ended run's pid may be this run's orphan now).
        roots = [
            o.launched.pid
            for o in self.sessions.values()
            if o is not s and o.running and o.launched
        ]
        members = s.tracker.members(roots)
        if not members:
            return 0
        with contextlib.suppress(Exception):
            s.launched.terminate(signal.SIGTERM)
        s.tracker.signal(signal.SIGTERM, roots)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            s.tracker.reap_orphans()
            if not s.tracker.members(roots):
                return len(members)
        with contextlib.suppress(Exception):
            s.launched.terminate(signal.SIGKILL)
        s.tracker.signal(signal.SIGKILL, roots)
        await asyncio.sleep(0.02)
        s.tracker.reap_orphans()
        return len(members)

    def _reap_strays(self) -> None:
        try:  # the kernel's word that some child has exited, reaping none: else nothing to do
            if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT | _WALL) is None:
                return
        except ChildProcessError:
            return
        roots = {o.launched.pid for o in self.sessions.values() if o.running and o.launched}
        for pid in proc.children(os.getpid()):
            if pid not in roots and proc.is_zombie(pid):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)

    def _on_timeout(self, s: Session) -> None:
        if not s.running:
            return
        s.timed_out = True
        self._terminate(s)

    def _terminate(self, s: Session) -> None:
        if s.launched is None or s.tracker is None:
            return  # not spawned yet: the deferred launch sees `killed` and gives up
        with contextlib.suppress(Exception):
            s.launched.terminate(signal.SIGTERM)
        s.tracker.signal(signal.SIGTERM)
        s.timers.append(self.loop.call_later(KILL_GRACE_S, self._kill_now, s))

    def _kill_now(self, s: Session, force: bool = False) -> None:
        """SIGKILL the whole run (``force``: from the guard's thread, on tampering)."""
        if force and s.ended_mono is not None and s.tracker is not None:
            # The root is reaped (its pid may be reused): only what is checked by start time.
            s.tracker.signal(signal.SIGKILL)
            return
        if (s.running or force) and s.launched is not None and s.tracker is not None:
            # The tree is read while its root still holds it together: killed first, the root's
            # children are handed to this process as it exits, and a listing made meanwhile
            # finds them under neither.
            s.tracker.signal(signal.SIGKILL)
            with contextlib.suppress(Exception):
                s.launched.terminate(signal.SIGKILL)
            s.tracker.signal(signal.SIGKILL)
            if force:
                # From the guard's thread: a process the listing missed (one forked while the
                # tree was read) must not go on, so the tree is read and signalled again until
                # nothing of it is left (a few rounds; each finds only what is still alive).
                for _ in range(KILL_ROUNDS):
                    time.sleep(0.005)
                    if not s.tracker.signal(signal.SIGKILL):
                        break

    async def kill(self, sid: str) -> RunResult:
        """Kill a session's whole tree; wait for it to end and return its result."""
        s = self._get(sid)
        if s.status == "awaiting_approval":  # killing a run the user has not decided on yet
            self.refuse(s.id, "cancel")
            return replace(s.result or self._result(s), already_ended=True)
        if not s.running:
            return replace(self._result(s), already_ended=True)
        s.killed = True
        if s.launched is not None:
            self._terminate(s)
        await s.done.wait()
        return self._result(s)

    async def kill_all(self) -> list[RunResult]:
        """Kill every running session."""
        for s in list(self.sessions.values()):
            if s.status == "awaiting_approval":
                self.refuse(s.id, "cancel")
        running = [s.id for s in self.sessions.values() if s.running]
        return list(await asyncio.gather(*(self.kill(sid) for sid in running)))

    # -- results and queries -------------------------------------------------------------------------

    def _get(self, sid: object) -> Session:
        if not isinstance(sid, str):
            raise UsageError(f"the session id should be a string, not {describe(sid)}")
        if sid not in self.sessions:
            live = [s.id for s in self.sessions.values() if s.running]
            hint = f"running sessions: {', '.join(live)}" if live else "no session is running"
            raise SessionError(f"unknown session id {sid!r} ({hint})")
        return self.sessions[sid]

    def _result(self, s: Session) -> RunResult:
        if s.capture is None:  # never started
            fields = {**s.fields(), "notices": ()}
            return RunResult(**fields, error=s.error or "not started")
        out_cfg = self.config.output
        return RunResult(
            **s.fields(),
            output=s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars),
            truncated=s.capture.total > out_cfg.max_chars or s.capture.capped,
            file_capped=s.capture.capped,
            leftovers=s.leftovers,
            wait_for=s.wait_for,
            ready=s.ready,
            matched_line=s.matched_line,
            ready_after_s=s.ready_after_s,
            timing=dict(s.marks) or None,
        )

    def _send_result(self, s: Session) -> None:
        if s.result_sent:
            return
        if s.background and s.running:
            self.forwarding.update()  # the first result says which ports the host can reach
            # The chat goes on while it runs: the links it makes are judged as they appear.
            self.keeper.watch_links(s.id)
        s.result_sent = True
        s.mark("result")
        self.waiters.stop_readiness(s)
        if s.background and s.running and s.capture is not None:
            # What the caller saw counts as read: `output` then returns only newer output.
            s.read_offset = s.capture.written
        s.result = self._result(s)
        assert s.result_future is not None
        if not s.result_future.done():
            s.result_future.set_result(s.result)
        self.on_event("result", s.result)

    async def wait_result(self, sid: str) -> RunResult:
        """The run's result: after exit (foreground) or after ``bg_after`` / exit (background)."""
        s = self._get(sid)
        assert s.result_future is not None
        return await asyncio.shield(s.result_future)

    def change_set_kept(self, sid: str) -> bool:
        """Whether session ``sid``'s change set is still kept (pruning of session history must not
        forget such a session: it can still be shown and undone by its id). Never blocks."""
        return self.changes is not None and self.changes.is_kept(sid)

    # -- output, waiting and history (their parts) --------------------------------------------------

    def watch(self, sid: object) -> LiveStart:
        """Turn on live output events for a session; return what was printed so far (bounded)."""
        return self.streams.watch(self._get(sid))

    def output(
        self, sid: object, tail: object = None, max_bytes: int = READ_PAGE_BYTES
    ) -> OutputPage:
        """New output since the last read (bounded), or the last ``tail`` lines."""
        return self.streams.output(self._get(sid), tail, max_bytes)

    def wait(
        self, sid: object, wait_for: object = None, timeout: object = None
    ) -> Awaitable[WaitResult]:
        """Wait for a line of new output to match ``wait_for``, or for the session to end
        (``Waiters.wait``). The arguments are checked at once (errors raise)."""
        return self.waiters.wait(self._get(sid), wait_for, timeout)

    def pin(self, sid: object, reason: object) -> SessionInfo:
        """Keep session ``sid`` however old it gets, for ``reason``, until ``unpin``."""
        return self.retention.pin(self._get(sid), reason)

    def unpin(self, sid: object, reason: object) -> bool:
        """Drop one reason to keep ``sid``; False when the session is already forgotten."""
        return self.retention.unpin(sid, reason)

    def prune(self) -> list[str]:
        """Forget finished sessions beyond ``sessions.keep_finished`` (``Retention.prune``)."""
        return self.retention.prune()

    def _ended(self, s: Session) -> SessionEnd:
        """The ``exited`` event: the session and the last lines of its output."""
        out_cfg = self.config.output
        text = s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars) if s.capture else ""
        return SessionEnd(**s.fields(), tail=last_lines(text))

    def list(self) -> list[SessionInfo]:
        """Every session, oldest first."""
        return [s.info() for s in sorted(self.sessions.values(), key=lambda x: x.started_mono)]

    async def shutdown(self) -> None:
        """Kill every session and remove the state directory."""
        running = [s for s in self.sessions.values() if s.running]
        for s in running:
            s.killed = True
            self._terminate(s)
        if running:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(s.done.wait() for s in running)), KILL_GRACE_S + 1.0
                )
        self.close_now()

    def close_now(self) -> None:
        """Synchronous last resort: KILL every session's processes and remove the state directory."""
        self.closing = True
        self.spares.close()
        self.keeper.shutdown()
        self.forwarding.close()
        for s in self.sessions.values():
            if s.running and s.launched is not None and s.tracker is not None:
                with contextlib.suppress(Exception):
                    s.launched.terminate(signal.SIGKILL)
                s.tracker.signal(signal.SIGKILL)
                s.tracker.reap_orphans()
        for s in self.sessions.values():
            for fd in (s.pipe_r, s.pidfd):
                if fd >= 0:
                    with contextlib.suppress(Exception):
                        self.loop.remove_reader(fd)
                    with contextlib.suppress(OSError):
                        os.close(fd)
            s.pipe_r = s.pidfd = -1
            if s.capture:
                s.capture.close()
                s.capture.release()
        self.launching.ready_file.close()
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self.temp.close()
        from run_bash.sandbox.cgroups import CGROUPS

        CGROUPS.collect()  # cgroups of runs that were still dying when they ended
