"""Sessions: spawn, foreground/background, timeouts, kill of whole trees, bounded output capture.

Plain asyncio, no pynvim: the host adapter forwards ``on_event`` calls to Neovim. Every public method
that is not a coroutine returns at once. API::

    mgr = SessionManager(config, loop=loop, on_event=lambda name, payload: ...)
    s = mgr.start("make test", cwd="/proj", timeout=300, bg_after=0)     # raises RunBashError
    result = await mgr.wait_result(s.id)   # fg: after exit; bg: after bg_after s or exit
    await mgr.kill(s.id); mgr.output(s.id, tail=50); mgr.list(); await mgr.shutdown()
    page = await mgr.wait(s.id, wait_for="ready", timeout=30)   # a match, the exit, or the timeout

Results are the dataclasses of ``results.py`` (``to_wire()`` gives the plain data Lua receives).
Events (``on_event(name, payload)``): ``started`` (SessionInfo), ``output`` (OutputChunk, throttled,
only for live sessions), ``result`` (RunResult, exactly once per run), ``exited`` (SessionEnd, when
a session that already reported ends, with its last lines of output).

``wait_for`` (a background run's readiness, and ``wait``) is matched in the capture path: each read
is fed to the session's waiters (``matching.LineMatcher``) as it arrives, and the exit path settles
the waiters that are left. A wait is a future; nothing polls.

With a ``changes`` hook (``run_changes.RunChanges``), each run's project is snapshotted before
its command is spawned and its change set recorded when it ends, before its final result is sent.

Completion is the exit of the command's root process, never pipe EOF. When the root exits, processes it
left behind (``cmd &``, ``setsid``, double forks) are stopped: TERM, KILL after ``KILL_GRACE_S``; the
result says how many. Use ``bg_after`` to keep a server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from run_bash.boundary import number, working_dir
from run_bash.config import (
    DEFAULT_WAIT_S,
    MAX_BG_AFTER_S,
    MAX_TIMEOUT_S,
    MAX_WAIT_S,
    Config,
    describe,
)
from run_bash.errors import RunBashError, SessionError, SpawnError, UsageError
from run_bash.matching import (
    MATCH_LINE_BYTES,
    LineMatcher,
    PatternTooSlow,
    budget_s,
    compile_pattern,
    time_limit,
)
from run_bash.output import (
    READ_PAGE_BYTES,
    Capture,
    OutputBudget,
    clean_text,
    last_lines,
    read_since,
)
from run_bash.results import (
    Forgotten,
    LiveStart,
    OutputChunk,
    OutputPage,
    RunResult,
    SessionEnd,
    SessionInfo,
    WaitResult,
    Wire,
)
from run_bash.sandbox import proc
from run_bash.sandbox.base import Backend, Choice, Launched, RunSpec, choose_backend, get_backend
from run_bash.sandbox.forward import FORWARD_POLL_S, PortForwarder
from run_bash.sandbox.guard import Keeper, Scope, quarantine_dir
from run_bash.sandbox.hostread import RulesName
from run_bash.sandbox.policy import Policy, build_env, build_policy
from run_bash.statedir import (
    MAX_TEMP_ENTRIES,
    dir_usage,
    free_bytes,
    fs_size,
    human_size,
    make_state_dir,
    make_temp_root,
)

if TYPE_CHECKING:
    from run_bash.changes import Token
    from run_bash.run_changes import RunChanges

KILL_GRACE_S = proc.KILL_GRACE_S
DRAIN_GRACE_S = 0.3
# How often the run temp dirs are checked against their cap (a statvfs); a walk of the temp dirs
# happens when the disk's free space fell by more than the smallest headroom left, or after
# TEMP_WALK_S anyway. A writer at page-cache speed (~3 GB/s) gets ~150 MB past the cap per tick.
TEMP_CHECK_S = 0.05
TEMP_WALK_S = 5.0
MAX_CMD_CHARS = 100_000
PIPE_SIZE = 1024 * 1024
READ_CHUNK = 256 * 1024
LIVE_CHUNK_CHARS = 64 * 1024
# `wait` with a pattern also searches the output not read yet, up to its last this many bytes.
WAIT_SCAN_BYTES = 1024 * 1024
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"

log = logging.getLogger("run_bash")

EventSink = Callable[[str, Wire], None]


def new_id(taken: Mapping[str, object]) -> str:
    """A short random id (6 chars, ~1e9 values) not in ``taken``."""
    while True:
        sid = "".join(secrets.choice(ID_ALPHABET) for _ in range(6))
        if sid not in taken:
            return sid


def check_cmd(cmd: object) -> str:
    """The command text, or one clear UsageError (not a string, empty, a NUL byte, too long).
    Cheap: it runs before the pause list parses anything."""
    if not isinstance(cmd, str):
        raise UsageError(f"`cmd` should be a string, not {describe(cmd)}")
    if not cmd.strip():
        raise UsageError("`cmd` is empty")
    if "\0" in cmd:
        raise UsageError("`cmd` contains a NUL byte")
    if len(cmd) > MAX_CMD_CHARS:
        raise UsageError(
            f"`cmd` is {len(cmd)} characters; the limit is {MAX_CMD_CHARS} "
            "(write the script to a file and run the file)"
        )
    return cmd


def ready_pattern(wait_for: object, bg_after_s: float) -> re.Pattern[str] | None:
    """The compiled ``wait_for`` of a run (None when not given); it needs a background run."""
    if wait_for is None:
        return None
    pattern = compile_pattern(wait_for)
    if bg_after_s <= 0:
        raise UsageError(
            "`wait_for` needs `bg_after`: the most seconds to wait for a matching line "
            f"(1..{MAX_BG_AFTER_S}); the command then keeps running in the background"
        )
    return pattern


def validate_request(
    cmd: object, timeout: object, bg_after: object, default_timeout: float
) -> tuple[str, float, float, bool]:
    """Check a run request; return (cmd, timeout_s, bg_after_s, timeout_given)."""
    cmd = check_cmd(cmd)
    t = number("timeout", timeout)
    if t is not None and not 1 <= t <= MAX_TIMEOUT_S:
        raise UsageError(f"`timeout` must be 1..{MAX_TIMEOUT_S} seconds, not {timeout!r}")
    b = number("bg_after", bg_after) or 0.0
    if not 0 <= b <= MAX_BG_AFTER_S:
        raise UsageError(f"`bg_after` must be 0..{MAX_BG_AFTER_S} seconds, not {bg_after!r}")
    return cmd, default_timeout if t is None else t, b, t is not None


@dataclass
class Waiter:
    """Someone waiting for a line of a session's output to match: ``settle(outcome, line)`` is
    called once, with "matched" and the line, "slow" (the pattern was dropped) or "exited"."""

    matcher: LineMatcher
    settle: Callable[[str, str | None], None]


class Session:
    """One command: its process, output and state."""

    def __init__(self, sid: str, cmd: str, cwd: str, backend: Backend, bg_after: float) -> None:
        self.id = sid
        self.cmd = cmd
        self.cwd = cwd
        self.backend = backend
        self.background = bg_after > 0
        self.bg_after = bg_after
        self.started_at = time.time()
        self.started_mono = time.monotonic()
        self.ended_mono: float | None = None
        # Why the session must be kept although it is old (an open :RunBashOutput buffer): pinned
        # sessions are never forgotten (``SessionManager.pin``); nor are runs whose change set the
        # undo store keeps (``change_set_kept``).
        self.pins: set[str] = set()
        # running | exited | timed_out | killed (also before it started) | failed (could not start)
        # | awaiting_approval (held) | rejected | cancelled (never started)
        self.status = "running"
        self.exit_code: int | None = None
        self.signal: int | None = None
        self.timed_out = False
        self.killed = False
        self.leftovers = 0
        self.notices: list[str] = []
        self.live = False
        self.read_offset = 0
        self.capture: Capture | None = None
        self.launched: Launched | None = None  # dropped when the run has ended
        self.root_pid: int | None = None
        self.tracker: proc.Tracker | None = None
        self.tmpdir = ""
        self.temp_cap = 0  # bytes its temp dir may hold
        self.temp_used = 0  # bytes its temp dir held when last measured
        self.pipe_r = -1
        self.pidfd = -1
        self.result_sent = False
        self.result: RunResult | None = None
        self.result_future: asyncio.Future[RunResult] | None = None
        self.done: asyncio.Event = asyncio.Event()
        self.timers: list[asyncio.TimerHandle] = []
        self.live_buf: list[str] = []
        self.live_pending = b""
        self.live_timer: asyncio.TimerHandle | None = None
        self.pipe_eof = asyncio.Event()
        self.timeout_s = 0.0
        self.timeout_given = False
        self.error: str | None = None
        # What the run changed in its project (``run_changes``), and its store token meanwhile.
        self.changes: dict[str, Any] | None = None
        self.change_token: Token | None = None
        # Readiness (`wait_for` on run) and `wait` calls, fed by the capture path.
        self.waiters: list[Waiter] = []
        self.ready_waiter: Waiter | None = None
        self.wait_for: str | None = None
        self.ready: str | None = None
        self.matched_line: str | None = None
        self.ready_after_s: float | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def pid(self) -> int | None:
        return self.launched.pid if self.launched else self.root_pid

    @property
    def duration_s(self) -> float:
        end = self.ended_mono if self.ended_mono is not None else time.monotonic()
        return round(end - self.started_mono, 3)

    def fields(self) -> dict[str, Any]:
        """The ``SessionInfo`` fields of this session now."""
        return {
            "id": self.id,
            "cmd": self.cmd,
            "cwd": self.cwd,
            "status": self.status,
            "pid": self.pid,
            "backend": self.backend.name,
            "sandboxed": bool(self.backend.isolates),
            "background": self.background,
            "started_at": self.started_at,
            "age_s": round(time.time() - self.started_at, 1),
            "duration_s": self.duration_s,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "killed": self.killed,
            # Kept when the history removed the file: its notice says so.
            "output_file": self.capture.path if self.capture else None,
            "output_bytes": self.capture.total if self.capture else 0,
            "notices": tuple(self.notices),
            "changes": self.changes,
            "ports": self.ports(),
        }

    def ports(self) -> tuple[int, ...]:
        """The TCP ports the session's processes listen on now (none once it ended)."""
        if not self.running or self.tracker is None:
            return ()
        from run_bash.sandbox.loopback import listening_ports

        return tuple(listening_ports(self.tracker.members()))

    def info(self) -> SessionInfo:
        """The summary for lists, completion and events."""
        return SessionInfo(**self.fields())


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
        self.loop = loop or asyncio.get_event_loop()
        self.on_event = on_event or (lambda _name, _payload: None)
        self.environ = dict(os.environ if environ is None else environ)
        self.state_dir = state_dir or make_state_dir(environ=self.environ)
        # Run temp dirs: on a disk-backed filesystem (statedir.py); created on the first run.
        self._temp_root = temp_root
        self._temp_timer: asyncio.TimerHandle | None = None
        self._temp_walk: asyncio.Future[None] | None = None
        self._temp_free = -1  # free bytes at the last walk
        self._temp_walked = 0.0
        self.sessions: dict[str, Session] = {}
        # Keeps what the host reads from the projects (guard.py); CodeCompanion's rules files.
        self.keeper = Keeper(quarantine_dir(self.environ))
        self.agent_rules: tuple[RulesName, ...] = ()
        self.project_config: tuple[str, ...] = ()
        self._budget: OutputBudget | None = None
        self._backends: dict[str, Backend] = {}
        self._warned: set[str] = set()
        self.subreaper = proc.set_child_subreaper()
        self._forwarder: PortForwarder | None = None
        self._forward_timer: asyncio.TimerHandle | None = None

    @property
    def budget(self) -> OutputBudget:
        """What all output files may hold together: ``output.dir_cap``, at most a quarter of the
        output directory's filesystem (``$XDG_RUNTIME_DIR`` is often a small RAM disk)."""
        cap = self.config.output.dir_cap
        size = fs_size(self.state_dir)
        if size > 0:
            cap = min(cap, size // 4)
        if self._budget is None:
            self._budget = OutputBudget(cap, self._reclaim_output)
        self._budget.cap = cap
        return self._budget

    @property
    def temp_root(self) -> str:
        """The directory holding the run temp dirs (created on first use)."""
        if self._temp_root is None:
            self._temp_root = make_temp_root(self.environ)
        return self._temp_root

    # -- backends ----------------------------------------------------------------------------------

    def configure(self, config: Config) -> None:
        """Use ``config`` from now on (runs already started keep theirs)."""
        self.config = config
        self._backends.clear()

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
    ) -> Session:
        """Start ``cmd``. Runs without a sandbox only when ``unsandboxed_ok`` (the user approved).

        Arguments are validated at once (errors raise). With ``defer`` the sandbox is built and the
        command spawned on the next loop iteration, so an RPC handler returns without waiting for
        it; a failure then becomes the session's result (``error``) instead of an exception. With
        ``hold`` nothing starts: the session waits for the user's decision (``release`` or
        ``refuse``). ``sid``: the id to use (the gate's decision id), else a new one. A run whose
        changes are recorded is always deferred: its project is snapshotted first, off the loop.
        ``wait_for``: a background run's result comes as soon as a line of output matches it.
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
        s.live = live
        s.timeout_s, s.timeout_given = timeout_s, timeout_given
        s.result_future = self.loop.create_future()
        if ready is not None:
            s.wait_for = ready.pattern
            s.ready_waiter = Waiter(LineMatcher(ready), lambda o, line: self._ready(s, o, line))
            s.waiters.append(s.ready_waiter)
        if why:
            s.notices.append(why)
        self.sessions[sid] = s
        if hold:
            s.status = "awaiting_approval"
            return s
        if defer or (self.changes is not None and self.changes.recording):
            self._launch_soon(s)
            return s
        try:
            self._launch(s, self._prepare(s))
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
        self.loop.create_task(self._launch_deferred(s))

    async def _launch_deferred(self, s: Session) -> None:
        """Deferred launch: the project's snapshot first, then the policy and the guard (they read
        files a sandbox can touch), both off the loop; then the spawn. A failure becomes the
        session's result instead of an exception."""
        if self.changes is not None and not s.killed:
            await self.changes.begin(s)
        if self.closing:
            s.killed = True
        await self._prepare_and_launch(s)
        if s.launched is None and self.changes is not None:
            await self.changes.abandon(s)

    async def _prepare_and_launch(self, s: Session) -> None:
        try:
            if s.killed:
                raise SessionError("killed before it started; nothing ran")
            if s.backend.isolates:
                prepared = await self.loop.run_in_executor(None, self._prepare, s)
            else:
                prepared = None, None  # nothing to prepare: start on this tick, as before
            if s.killed:
                self.keeper.release(s.id)
                raise SessionError("killed before it started; nothing ran")
            self._launch(s, prepared)
        except Exception as err:
            if not isinstance(err, RunBashError):
                log.exception("could not start session %s", s.id)
            s.status = "killed" if s.killed else "failed"
            s.error = str(err) if isinstance(err, RunBashError) else f"internal error: {err}"
            s.ended_mono = time.monotonic()
            self._send_result(s)
            s.done.set()
            self.prune()

    def _prepare(self, s: Session) -> tuple[Policy | None, Scope | None]:
        """The run's policy and the guard of what the host reads from its project. Host I/O
        (git, the project's files): never on the loop for a deferred run. Raises on failure."""
        if not s.backend.isolates:
            return None, None
        # Ports served by this host's own descendants (earlier sessions) stay reachable; the policy
        # finds them in the same listener scan it uses to block other local services.
        policy = build_policy(
            self.config,
            s.cwd,
            env=self.environ,
            discovery=self.keeper.discovery,
            agent_rules=self.agent_rules,
            project_files=self.project_config,
            untrusted=self.keeper.untrusted(),
            # The change store is never reachable from inside, whatever the rules grant.
            hidden=self.changes.private_paths() if self.changes is not None else (),
        )
        assert policy.host_read is not None
        return policy, self.keeper.prepare(s.id, policy.host_read)

    def _launch(self, s: Session, prepared: tuple[Policy | None, Scope | None]) -> None:
        """Build the run's files and environment, and spawn it. Raises on failure."""
        sid, backend = s.id, s.backend
        s.tmpdir = tempfile.mkdtemp(prefix=f"tmp-{sid}-", dir=self.temp_root)
        s.temp_cap = min(self.config.sandbox.limits.max_temp_size, free_bytes(self.temp_root) // 2)
        out_path = os.path.join(self.state_dir, f"{sid}.log")
        r = w = -1
        try:
            s.capture = Capture(out_path, self.config.output.file_cap, budget=self.budget)
            self._report_stop(s)
            r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: fewer wake-ups for chatty commands
            # The write end must block: a command writing faster than we read should wait, not fail.
            os.set_blocking(w, True)
            env, dropped = build_env(
                self.config, tmpdir=s.tmpdir, session_id=sid, base_env=self.environ
            )
            for name in dropped:
                if name not in self._warned:
                    self._warned.add(name)
                    s.notices.append(f"environment variable {name} looks secret; not passed")
            spec = RunSpec(
                cmd=s.cmd,
                cwd=s.cwd,
                env=env,
                stdout_fd=w,
                tmpdir=s.tmpdir,
                session_id=sid,
                policy=prepared[0],
            )
            s.launched = backend.spawn(spec)
        except BaseException:
            self.keeper.release(sid)
            for fd in (r, w):
                if fd >= 0:
                    os.close(fd)
            if s.capture:
                s.capture.close()
                s.capture = None
                with contextlib.suppress(OSError):
                    os.unlink(out_path)
            shutil.rmtree(s.tmpdir, ignore_errors=True)
            raise
        os.close(w)
        s.pipe_r = r
        s.tracker = proc.Tracker(sid, s.launched.pid)
        if prepared[1] is not None:
            s.notices.extend(prepared[1].notices)
            prepared[1].attach(lambda: self._kill_now(s, force=True))
        s.notices.extend(s.launched.notices)
        self.loop.add_reader(r, self._on_readable, s)
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
        if s.background:
            s.timers.append(self.loop.call_later(s.bg_after, self._send_result, s))
        self._schedule_temp_check()
        log.debug(
            "started %s pid=%s backend=%s cwd=%s cmd=%r",
            sid,
            s.launched.pid,
            backend.name,
            s.cwd,
            s.cmd,
        )
        self.on_event("started", s.info())
        self._forward_ports(later=True)

    # -- the temp dir cap ------------------------------------------------------------------------------

    def _schedule_temp_check(self) -> None:
        if self._temp_timer is None and any(x.running and x.tmpdir for x in self.sessions.values()):
            self._temp_timer = self.loop.call_later(TEMP_CHECK_S, self._check_temp)

    def _check_temp(self) -> None:
        """Stop any run whose temp dir grew past its cap. The walk (in a thread) runs only when the
        temp filesystem lost more free space than the smallest headroom left, or every
        ``TEMP_WALK_S``: a run cannot pass its cap without the free space dropping by as much."""
        self._temp_timer = None
        runs = [x for x in self.sessions.values() if x.running and x.tmpdir and x.launched]
        if not runs or self._temp_walk is not None:
            self._schedule_temp_check()
            return
        free = free_bytes(self.temp_root)
        # Space freed since the walk (a run ended, files were removed) raises the baseline, so it
        # can never hide what is written after it.
        self._temp_free = max(self._temp_free, free) if self._temp_free >= 0 else -1
        headroom = min(x.temp_cap - x.temp_used for x in runs)
        due = time.monotonic() - self._temp_walked >= TEMP_WALK_S
        if self._temp_free >= 0 and self._temp_free - free < headroom and not due:
            self._schedule_temp_check()
            return
        self._temp_free = free
        self._temp_walked = time.monotonic()
        self._temp_walk = asyncio.ensure_future(self._walk_temp(runs), loop=self.loop)

    async def _walk_temp(self, runs: list[Session]) -> None:
        try:
            for x in runs:
                used, partial = await self.loop.run_in_executor(None, dir_usage, x.tmpdir)
                x.temp_used = used
                if x.running and (used > x.temp_cap or partial):
                    self._stop_for_temp(x, used, partial)
        finally:
            self._temp_walk = None
            self._schedule_temp_check()

    def _stop_for_temp(self, s: Session, used: int, partial: bool) -> None:
        if partial:
            why = (
                "stopped: its temp dir (TMPDIR) could not be measured in full (over "
                f"{MAX_TEMP_ENTRIES} entries, too deep, or unreadable) against its cap of "
                f"{human_size(s.temp_cap)}; the files are removed"
            )
        else:
            why = (
                f"stopped: its temp dir (TMPDIR) held {human_size(used)}, over its cap of "
                f"{human_size(s.temp_cap)} (sandbox.limits.max_temp_size, at most half the free "
                "disk space); the files are removed"
            )
        s.notices.append(why)
        log.warning("session %s: temp dir over its cap (%d > %d bytes)", s.id, used, s.temp_cap)
        s.killed = True
        self._terminate(s)
        self._kill_now(s)

    # -- I/O -----------------------------------------------------------------------------------------

    def _on_readable(self, s: Session) -> None:
        got = 0
        while got < 4 * READ_CHUNK:
            try:
                data = os.read(s.pipe_r, READ_CHUNK)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                self._close_pipe(s)
                break
            got += len(data)
            assert s.capture is not None
            s.capture.feed(data)
            if s.live:
                self._queue_live(s, data)
            self._report_stop(s)
            if s.waiters:
                self._match(s, data)

    def _report_stop(self, s: Session) -> None:
        """Tell the result and the live view, once, that the output file stopped short (a full
        disk, a quota, the output directory's cap); the output goes on in memory."""
        why = s.capture.stopped if s.capture is not None else None
        if why is None or why in s.notices:
            return
        log.warning("session %s: %s", s.id, why)
        s.notices.append(why)
        if s.live:
            # Sent now, past the live throttle (which may drop queued output, never this).
            if s.live_timer is not None:
                s.live_timer.cancel()
                s.live_timer = None
            self._flush_live(s)
            self.on_event("output", OutputChunk(s.id, f"\n[run_bash: {why}]\n"))

    def _close_pipe(self, s: Session) -> None:
        if s.pipe_r >= 0:
            self.loop.remove_reader(s.pipe_r)
            os.close(s.pipe_r)
            s.pipe_r = -1
        s.pipe_eof.set()

    def _queue_live(self, s: Session, data: bytes) -> None:
        s.live_pending += data
        if len(s.live_pending) > 2 * LIVE_CHUNK_CHARS:
            skipped = len(s.live_pending) - LIVE_CHUNK_CHARS
            s.live_pending = (
                f"\n[… {skipped} bytes not shown live; see the output file …]\n".encode()
                + s.live_pending[-LIVE_CHUNK_CHARS:]
            )
        if s.live_timer is None:
            interval = self.config.output.live_interval_ms / 1000
            s.live_timer = self.loop.call_later(interval, self._flush_live, s)

    def _flush_live(self, s: Session) -> None:
        s.live_timer = None
        data, s.live_pending = s.live_pending, b""
        if not data:
            return
        # Keep an incomplete UTF-8 sequence or line for the next flush while the command runs.
        if s.running and not s.pipe_eof.is_set():
            nl = data.rfind(b"\n")
            if 0 <= nl < len(data) - 1 and len(data) - nl < 4096:
                data, s.live_pending = data[: nl + 1], data[nl + 1 :]
        text = clean_text(data, self.config.output.max_line_chars)
        self.on_event("output", OutputChunk(s.id, text))
        if s.live_pending and s.live_timer is None:
            interval = self.config.output.live_interval_ms / 1000
            s.live_timer = self.loop.call_later(interval, self._flush_live, s)

    def watch(self, sid: object) -> LiveStart:
        """Turn on live output events for a session; return what was printed so far (bounded)."""
        s = self._get(sid)
        s.live = True
        if s.capture is None:
            return LiveStart(**s.fields())
        if s.capture.removed:  # an old session whose file made room for newer output
            out_cfg = self.config.output
            text = s.capture.agent_text(out_cfg.max_chars, out_cfg.max_line_chars)
            return LiveStart(**s.fields(), data=text)
        # Output still queued for a live event is left out: the event will bring it.
        end = s.capture.total - len(s.live_pending)
        if s.capture.stopped is None:
            end = min(s.capture.written, end)
        data, _end = s.capture.last_lines(10_000, 4 * READ_PAGE_BYTES, end)
        return LiveStart(**s.fields(), data=clean_text(data, self.config.output.max_line_chars))

    # -- exit, timeout, kill -----------------------------------------------------------------------

    def _on_pidfd(self, s: Session) -> None:
        self.loop.remove_reader(s.pidfd)
        os.close(s.pidfd)
        s.pidfd = -1
        self._on_root_exit(s)

    def _on_root_exit(self, s: Session) -> None:
        self.loop.create_task(self._finish(s))

    async def _finish(self, s: Session) -> None:
        assert s.launched is not None and s.tracker is not None
        status = await self.loop.run_in_executor(None, s.launched.reap)
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
        if n and not s.killed and not s.timed_out:
            s.leftovers = n
        try:
            await asyncio.wait_for(s.pipe_eof.wait(), DRAIN_GRACE_S)
        except asyncio.TimeoutError:
            if s.pipe_r >= 0:
                self._on_readable(s)
            self._close_pipe(s)
        if s.live_timer is not None:
            s.live_timer.cancel()
            s.live_timer = None
        if s.live:
            self._flush_live(s)
        assert s.capture is not None
        s.capture.close()
        out_cfg = self.config.output
        s.capture.freeze(out_cfg.max_chars, out_cfg.max_line_chars)
        with contextlib.suppress(Exception):
            s.launched.close()
        # What the host reads from the project is checked now that nothing of the run is left.
        kept = await self.loop.run_in_executor(None, self.keeper.finish, s.id)
        for notice in [*s.launched.notices, *kept]:
            if notice not in s.notices:
                s.notices.append(notice)
        # A finished session is kept (sessions.keep_finished) as its summary and text only: the
        # backend's objects (a sandbox, its guard's snapshots) go now.
        s.root_pid, s.launched = s.launched.pid, None
        # The run filled it: removing may take long, and is never the loop's to wait for.
        await self.loop.run_in_executor(None, shutil.rmtree, s.tmpdir, True)
        if s.timed_out:
            s.status = "timed_out"
        elif s.killed:
            s.status = "killed"
        else:
            s.status = "exited"
        self._reap_strays()
        # Post-run checks that put project files back (the guard's restore of protected files)
        # belong above this line: the change set must show the project as the run left it.
        if self.changes is not None:
            await self.changes.finish(s)
        self._settle_waiters(s)
        log.debug(
            "ended %s status=%s exit=%s duration=%.3fs bytes=%d leftovers=%d",
            s.id,
            s.status,
            s.exit_code,
            s.duration_s,
            s.capture.total,
            s.leftovers,
        )
        was_sent = s.result_sent
        self._send_result(s)
        if was_sent:
            self.on_event("exited", self._ended(s))
        s.done.set()
        self.prune()

    async def _sweep(self, s: Session) -> int:
        """TERM the run's remaining processes, KILL after the grace; return how many there were."""
        assert s.tracker is not None and s.launched is not None
        roots = [o.launched.pid for o in self.sessions.values() if o is not s and o.launched]
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
            with contextlib.suppress(Exception):
                s.launched.terminate(signal.SIGKILL)
            s.tracker.signal(signal.SIGKILL)

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
        )

    def _forward_ports(self, later: bool = False) -> None:
        """Forward the ports that running sessions in run_bash's own network namespace listen on
        to the host's loopback (``forward.py``): now, then every ``FORWARD_POLL_S`` while a
        session runs; ``later``: only make sure it is scheduled."""
        if later and self._forward_timer is not None:
            return
        if self._forward_timer is not None:
            self._forward_timer.cancel()
        self._forward_timer = None
        if not self.config.sandbox.network.forward_ports:
            return
        if not later:
            from run_bash.sandbox.netholder import NET_HOLDER

            wanted = {
                s.id: list(s.ports())
                for s in self.sessions.values()
                if s.running and s.launched is not None and NET_HOLDER.holds(s.launched.pid)
            }
            if wanted or self._forwarder is not None:
                if self._forwarder is None:
                    self._forwarder = PortForwarder(self.loop, _connect_in_netns)
                for sid, text in self._forwarder.update(wanted):
                    self.sessions[sid].notices.append(text)
        if any(s.running for s in self.sessions.values()):
            self._forward_timer = self.loop.call_later(FORWARD_POLL_S, self._forward_ports)

    def _send_result(self, s: Session) -> None:
        if s.result_sent:
            return
        if s.background and s.running:
            self._forward_ports()  # the first result says which ports the host can reach
        s.result_sent = True
        self._stop_readiness(s)
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

    def output(
        self, sid: object, tail: object = None, max_bytes: int = READ_PAGE_BYTES
    ) -> OutputPage:
        """New output since the last read (bounded), or the last ``tail`` lines."""
        s = self._get(sid)
        if s.capture is None:
            return OutputPage(**s.fields())
        if s.capture.removed:  # an old session whose file made room for newer output
            max_chars = self.config.output.max_chars
            text = s.capture.agent_text(max_chars, self.config.output.max_line_chars)
            return OutputPage(**s.fields(), output=text)
        if s.pipe_r >= 0:
            self._on_readable(s)  # include what is already in the pipe
        max_line = self.config.output.max_line_chars
        max_chars = self.config.output.max_chars
        if tail is not None:
            if isinstance(tail, bool) or not isinstance(tail, int) or tail <= 0:
                raise UsageError(f"tail should be a positive number of lines, not {tail!r}")
            data, end = s.capture.last_lines(tail, min(max_bytes, max_chars))
            s.read_offset = max(s.read_offset, end)
            return OutputPage(**s.fields(), output=clean_text(data, max_line))
        # A page is at most max_chars bytes, so cleaning never has to drop any of it: what is
        # not returned now stays unread for the next call.
        data, s.read_offset, left = s.capture.read(s.read_offset, min(max_bytes, max_chars))
        return OutputPage(**s.fields(), output=clean_text(data, max_line), unread_bytes=left)

    def change_set_kept(self, sid: str) -> bool:
        """Whether session ``sid``'s change set is still kept (pruning of session history must not
        forget such a session: it can still be shown and undone by its id). Never blocks."""
        return self.changes is not None and self.changes.is_kept(sid)

    # -- history ----------------------------------------------------------------------------------

    def pin(self, sid: object, reason: object) -> SessionInfo:
        """Keep session ``sid`` however old it gets, for ``reason`` (e.g. "output buffer": the
        user has its output open), until ``unpin``."""
        s = self._get(sid)
        if not isinstance(reason, str) or not reason:
            raise UsageError(f"a pin needs a reason (a non-empty string), not {reason!r}")
        s.pins.add(reason)
        return s.info()

    def unpin(self, sid: object, reason: object) -> bool:
        """Drop one reason to keep ``sid``; False when the session is already forgotten."""
        if not isinstance(reason, str) or not reason:
            raise UsageError(f"a pin needs a reason (a non-empty string), not {reason!r}")
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            return False
        s.pins.discard(reason)
        self.prune()
        return True

    def _finished_oldest_first(self) -> list[Session]:
        done = [s for s in self.sessions.values() if s.done.is_set() and s.ended_mono is not None]
        return sorted(done, key=lambda s: s.ended_mono or 0.0)

    def prune(self) -> list[str]:
        """Forget finished sessions beyond the newest ``sessions.keep_finished`` (their summary,
        text and output file), except pinned ones; tell Lua (``forgotten``). Returns the ids."""
        done = self._finished_oldest_first()
        excess = len(done) - self.config.sessions.keep_finished
        gone: list[str] = []
        for s in done[: max(0, excess)]:
            if s.pins or self.change_set_kept(s.id):
                continue
            self._remove_output(s)
            del self.sessions[s.id]
            gone.append(s.id)
        if gone:
            log.debug("forgot %d finished session(s)", len(gone))
            self.on_event("forgotten", Forgotten(tuple(gone)))
        return gone

    def _remove_output(self, s: Session) -> int:
        """Delete a finished session's output file; return the bytes freed."""
        c = s.capture
        if c is None or c.removed:
            return 0
        with contextlib.suppress(OSError):
            os.unlink(c.path)
        c.removed = True
        freed = c.on_disk
        if self._budget is not None:
            self._budget.release(freed)
        return freed

    def _reclaim_output(self, need: int) -> None:
        """The output budget is short by ``need`` bytes: remove the output files of the oldest
        finished, unpinned sessions until that much is free (their summary and text stay)."""
        freed = 0
        for s in self._finished_oldest_first():
            if freed >= need:
                break
            if s.pins or s.capture is None or s.capture.removed or not s.capture.on_disk:
                continue
            freed += self._remove_output(s)
            s.notices.append(
                "output file removed to keep the output directory under its cap "
                f"({human_size(self.budget.cap)}, output.dir_cap)"
            )

    # -- waiting for output --------------------------------------------------------------------------

    def _match(self, s: Session, data: bytes) -> None:
        """Capture path: feed a read to the session's waiters; settle those it matches."""
        for w in list(s.waiters):
            try:
                with time_limit(budget_s(len(data))):
                    line = w.matcher.feed(data)
            except PatternTooSlow:
                self._settle(s, w, "slow", None)
                continue
            if line is not None:
                self._settle(s, w, "matched", line)

    def _settle(self, s: Session, w: Waiter, outcome: str, line: str | None) -> None:
        if w in s.waiters:
            s.waiters.remove(w)
            w.settle(outcome, line)

    def _settle_waiters(self, s: Session) -> None:
        """Exit path: the output is complete; its last line (if no newline ended it) can still
        match, then every waiter left hears of the exit."""
        for w in list(s.waiters):
            try:
                with time_limit(budget_s(MATCH_LINE_BYTES)):
                    line = w.matcher.finish()
            except PatternTooSlow:
                line = None
            self._settle(s, w, "exited" if line is None else "matched", line)

    def _ready(self, s: Session, outcome: str, line: str | None) -> None:
        """The readiness wait ended; a running session's result goes at once."""
        s.ready, s.matched_line = outcome, line
        s.ready_after_s = round(time.monotonic() - s.started_mono, 1)
        if s.ended_mono is None:  # the exit path sends the result itself, with the exit status
            self._send_result(s)

    def _stop_readiness(self, s: Session) -> None:
        """The result goes now: stop matching for it and say why it was not a match."""
        w, s.ready_waiter = s.ready_waiter, None
        if w is None:
            return
        if w in s.waiters:
            s.waiters.remove(w)
        if s.ready is None and s.capture is not None:
            s.ready = "exited" if s.ended_mono is not None else "timeout"
            s.ready_after_s = round(time.monotonic() - s.started_mono, 1)

    def wait(
        self, sid: object, wait_for: object = None, timeout: object = None
    ) -> Awaitable[WaitResult]:
        """Wait (at most ``timeout`` seconds, 1..MAX_WAIT_S) for a line of output new since the
        last read to match ``wait_for``, or, without it, for the session to end. The arguments are
        checked at once (errors raise); the awaitable gives the outcome and the new output."""
        s = self._get(sid)
        pattern = None if wait_for is None else compile_pattern(wait_for)
        t = number("timeout", timeout)
        if t is not None and not 1 <= t <= MAX_WAIT_S:
            raise UsageError(
                f"`timeout` of a wait must be 1..{MAX_WAIT_S} seconds, not {timeout!r}"
            )
        return self._wait(s, pattern, DEFAULT_WAIT_S if t is None else t)

    async def _wait(
        self, s: Session, pattern: re.Pattern[str] | None, timeout_s: float
    ) -> WaitResult:
        t0 = time.monotonic()
        if not s.running and s.status != "awaiting_approval":
            return self._waited(s, "ended", pattern, None, t0)
        settled: asyncio.Future[tuple[str, str | None]] = self.loop.create_future()

        def settle(outcome: str, line: str | None) -> None:
            if not settled.done():
                settled.set_result((outcome, line))

        waiter = None
        if pattern is not None:
            matcher = LineMatcher(pattern)
            if s.pipe_r >= 0:
                self._on_readable(s)  # what is in the pipe already is output too
            early = self._scan_unread(s, matcher)
            if early is not None:
                return self._waited(s, early[0], pattern, early[1], t0)
            waiter = Waiter(matcher, settle)
            s.waiters.append(waiter)
        ended = self.loop.create_task(s.done.wait())  # also ends a run that never started
        try:
            either: set[asyncio.Future[Any]] = {settled, ended}
            await asyncio.wait(either, timeout=timeout_s, return_when="FIRST_COMPLETED")
        finally:
            ended.cancel()
            if waiter is not None and waiter in s.waiters:
                s.waiters.remove(waiter)
        if settled.done():
            outcome, line = settled.result()
        else:
            outcome, line = ("exited" if s.done.is_set() else "timeout"), None
        return self._waited(s, outcome, pattern, line, t0)

    def _scan_unread(self, s: Session, matcher: LineMatcher) -> tuple[str, str | None] | None:
        """Search the output not read yet (its last WAIT_SCAN_BYTES) before waiting for more."""
        cap = s.capture
        if cap is None or cap.capped or cap.written <= s.read_offset:
            return None
        start = max(s.read_offset, cap.written - WAIT_SCAN_BYTES)
        pos, skip_partial = start, start > s.read_offset
        while pos < cap.written:
            data, pos, _left = read_since(cap.path, pos, min(READ_CHUNK, cap.written - pos))
            if not data:
                break
            if skip_partial:  # the scan starts mid-output: begin at a line's start
                nl = data.find(b"\n")
                data = data[nl + 1 :] if nl >= 0 else b""
                skip_partial = nl < 0
            try:
                with time_limit(budget_s(len(data))):
                    line = matcher.feed(data)
            except PatternTooSlow:
                return ("slow", None)
            if line is not None:
                return ("matched", line)
        return None

    def _waited(
        self,
        s: Session,
        outcome: str,
        pattern: re.Pattern[str] | None,
        line: str | None,
        t0: float,
    ) -> WaitResult:
        page = self.output(s.id)
        return WaitResult(
            **{f.name: getattr(page, f.name) for f in dataclasses.fields(page)},
            outcome=outcome,
            wait_for=None if pattern is None else pattern.pattern,
            matched_line=line,
            waited_s=round(time.monotonic() - t0, 2),
        )

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
        self.keeper.shutdown()
        if self._forward_timer is not None:
            self._forward_timer.cancel()
            self._forward_timer = None
        if self._forwarder is not None:
            self._forwarder.close()
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
        if self._temp_timer is not None:
            self._temp_timer.cancel()
            self._temp_timer = None
        shutil.rmtree(self.state_dir, ignore_errors=True)
        if self._temp_root is not None:
            shutil.rmtree(self._temp_root, ignore_errors=True)


def _connect_in_netns(port: int) -> socket.socket:
    """A socket connected to ``port`` inside run_bash's own network namespace."""
    from run_bash.sandbox.launcher import launcher
    from run_bash.sandbox.netholder import NET_HOLDER

    netns = NET_HOLDER.fds()
    if netns is None:
        raise ConnectionRefusedError(NET_HOLDER.error)
    return launcher().connect(port, netns)
