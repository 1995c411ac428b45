"""Sessions: spawn, foreground/background, timeouts, kill of whole trees, bounded output capture.

Plain asyncio, no pynvim: the host adapter forwards ``on_event`` calls to Neovim. Every public method
that is not a coroutine returns at once. API::

    mgr = SessionManager(config, loop=loop, on_event=lambda name, payload: ...)
    s = mgr.start("make test", cwd="/proj", timeout=300, bg_after=0)     # raises RunBashError
    result = await mgr.wait_result(s.id)   # fg: after exit; bg: after bg_after s or exit
    await mgr.kill(s.id); mgr.output(s.id, tail=50); mgr.list(); await mgr.shutdown()

Results are the dataclasses of ``results.py`` (``to_wire()`` gives the plain data Lua receives).
Events (``on_event(name, payload)``): ``started`` (SessionInfo), ``output`` (OutputChunk, throttled,
only for live sessions), ``result`` (RunResult, exactly once per run), ``exited`` (SessionInfo, when
a session that already reported ends).

Completion is the exit of the command's root process, never pipe EOF. When the root exits, processes it
left behind (``cmd &``, ``setsid``, double forks) are stopped: TERM, KILL after ``KILL_GRACE_S``; the
result says how many. Use ``bg_after`` to keep a server running.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from run_bash.config import MAX_BG_AFTER_S, MAX_TIMEOUT_S, Config
from run_bash.errors import RunBashError, SessionError, SpawnError, UsageError
from run_bash.output import READ_PAGE_BYTES, Capture, clean_text, read_since, tail_lines
from run_bash.results import LiveStart, OutputChunk, OutputPage, RunResult, SessionInfo, Wire
from run_bash.sandbox import proc
from run_bash.sandbox.base import Backend, Launched, RunSpec, get_backend
from run_bash.sandbox.forward import FORWARD_POLL_S, PortForwarder
from run_bash.sandbox.policy import build_env

KILL_GRACE_S = proc.KILL_GRACE_S
DRAIN_GRACE_S = 0.3
MAX_CMD_CHARS = 100_000
PIPE_SIZE = 1024 * 1024
READ_CHUNK = 256 * 1024
LIVE_CHUNK_CHARS = 64 * 1024
ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"

log = logging.getLogger("run_bash")

EventSink = Callable[[str, Wire], None]


def new_id(taken: Mapping[str, object]) -> str:
    """A short random id (6 chars, ~1e9 values) not in ``taken``."""
    while True:
        sid = "".join(secrets.choice(ID_ALPHABET) for _ in range(6))
        if sid not in taken:
            return sid


def make_state_dir(base: str | None = None) -> str:
    """Create the 0700 directory private to this host that holds output files and temp dirs."""
    root = base or os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if not os.path.isdir(root) or not os.access(root, os.W_OK):
        root = tempfile.gettempdir()
    path = tempfile.mkdtemp(prefix=f"run_bash-{os.getpid()}-", dir=root)
    os.chmod(path, 0o700)
    return path


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name} should be a number of seconds, not {value!r}")
    return float(value)


def check_cmd(cmd: object) -> str:
    """The command text, or one clear UsageError (not a string, empty, a NUL byte, too long).
    Cheap: it runs before the pause list parses anything."""
    if not isinstance(cmd, str):
        raise UsageError(f"cmd should be a string, not {type(cmd).__name__}")
    if not cmd.strip():
        raise UsageError("cmd is empty")
    if "\0" in cmd:
        raise UsageError("cmd contains a NUL byte")
    if len(cmd) > MAX_CMD_CHARS:
        raise UsageError(
            f"cmd is {len(cmd)} characters; the limit is {MAX_CMD_CHARS} "
            "(write the script to a file and run the file)"
        )
    return cmd


def validate_request(
    cmd: object, timeout: object, bg_after: object, default_timeout: float
) -> tuple[str, float, float, bool]:
    """Check a run request; return (cmd, timeout_s, bg_after_s, timeout_given)."""
    cmd = check_cmd(cmd)
    given = timeout is not None
    t = default_timeout if timeout is None else _number("timeout", timeout)
    if not 0 < t <= MAX_TIMEOUT_S:
        raise UsageError(f"timeout must be 1..{MAX_TIMEOUT_S} seconds, not {timeout!r}")
    b = 0.0 if bg_after is None else _number("bg_after", bg_after)
    if not 0 <= b <= MAX_BG_AFTER_S:
        raise UsageError(f"bg_after must be 0..{MAX_BG_AFTER_S} seconds, not {bg_after!r}")
    return cmd, t, b, given


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
        # running | exited | timed_out | killed | failed (could not start)
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
        self.launched: Launched | None = None
        self.tracker: proc.Tracker | None = None
        self.tmpdir = ""
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

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def pid(self) -> int | None:
        return self.launched.pid if self.launched else None

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
            "output_file": self.capture.path if self.capture else None,
            "output_bytes": self.capture.total if self.capture else 0,
            "notices": tuple(self.notices),
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
    ) -> None:
        self.config = config
        self.loop = loop or asyncio.get_event_loop()
        self.on_event = on_event or (lambda _name, _payload: None)
        self.state_dir = state_dir or make_state_dir()
        self.environ = dict(os.environ if environ is None else environ)
        self.sessions: dict[str, Session] = {}
        self._backends: dict[str, Backend] = {}
        self._warned: set[str] = set()
        self.subreaper = proc.set_child_subreaper()
        self._forwarder: PortForwarder | None = None
        self._forward_timer: asyncio.TimerHandle | None = None

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

    def resolve_backend(self, requested: str | None = None) -> tuple[Backend, str]:
        """The backend a run would use and, when it is not the configured one, why."""
        name = requested or self.config.sandbox.backend
        backend = self.backend(name)
        if name == "none":
            return backend, ""
        avail = backend.availability()
        if avail.ok:
            return backend, ""
        return self.backend("none"), f"{name} unavailable: {avail.reason}"

    # -- start -------------------------------------------------------------------------------------

    def start(
        self,
        cmd: object,
        *,
        cwd: str | None = None,
        timeout: object = None,
        bg_after: object = 0,
        skip_sandbox: bool = False,
        unsandboxed_ok: bool = False,
        live: bool = False,
        defer: bool = False,
        hold: bool = False,
    ) -> Session:
        """Start ``cmd``. Runs without a sandbox only when ``unsandboxed_ok`` (the user approved).

        Arguments are validated at once (errors raise). With ``defer`` the sandbox is built and the
        command spawned on the next loop iteration, so an RPC handler returns without waiting for
        it; a failure then becomes the session's result (``error``) instead of an exception. With
        ``hold`` nothing starts: the session waits for the user's decision (``release`` or
        ``refuse``).
        """
        text, timeout_s, bg_s, timeout_given = validate_request(
            cmd, timeout, bg_after, float(self.config.default_timeout)
        )
        cwd = os.path.abspath(os.path.expanduser(cwd or os.getcwd()))
        if not os.path.isdir(cwd):
            raise UsageError(f"working directory {cwd} does not exist")
        if bg_s > 0:
            limit = self.config.sessions.max_background
            live_bg = sum(1 for s in self.sessions.values() if s.running and s.background)
            if live_bg >= limit:
                raise UsageError(
                    f"{live_bg} background sessions are running (limit {limit}); "
                    "kill one first (action=kill)"
                )
        backend, why = self.resolve_backend("none" if skip_sandbox else None)
        if not backend.isolates and not unsandboxed_ok and not hold:
            reason = why or "the sandbox is off"
            raise SpawnError(f"{reason}; running without a sandbox needs the user's approval")

        sid = new_id(self.sessions)
        s = Session(sid, text, cwd, backend, bg_s)
        s.live = live
        s.timeout_s, s.timeout_given = timeout_s, timeout_given
        s.result_future = self.loop.create_future()
        if why:
            s.notices.append(why)
        self.sessions[sid] = s
        if hold:
            s.status = "awaiting_approval"
            return s
        if defer:
            self.loop.call_soon(self._launch_or_fail, s)
            return s
        try:
            self._launch(s)
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
        self.loop.call_soon(self._launch_or_fail, s)
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

    def _launch_or_fail(self, s: Session) -> None:
        """Deferred launch: a failure becomes the session's result instead of an exception."""
        try:
            if s.killed:
                raise SessionError("killed before it started")
            self._launch(s)
        except Exception as err:
            if not isinstance(err, RunBashError):
                log.exception("could not start session %s", s.id)
            s.status = "failed"
            s.error = str(err) if isinstance(err, RunBashError) else f"internal error: {err}"
            s.ended_mono = time.monotonic()
            self._send_result(s)
            s.done.set()

    def _launch(self, s: Session) -> None:
        """Build the run's files, environment and policy, and spawn it. Raises on failure."""
        sid, backend = s.id, s.backend
        s.tmpdir = tempfile.mkdtemp(prefix=f"tmp-{sid}-", dir=self.state_dir)
        out_path = os.path.join(self.state_dir, f"{sid}.log")
        r = w = -1
        try:
            s.capture = Capture(out_path, self.config.output.file_cap)
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
                policy=self._policy(backend, s.cwd),
            )
            s.launched = backend.spawn(spec)
        except BaseException:
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

    def _policy(self, backend: Backend, cwd: str) -> Any:
        if not backend.isolates:
            return None
        from run_bash.sandbox.policy import build_policy

        # Ports served by this host's own descendants (earlier sessions) stay reachable; the policy
        # finds them in the same listener scan it uses to block other local services.
        return build_policy(self.config, cwd, env=self.environ)

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

    def watch(self, sid: str) -> LiveStart:
        """Turn on live output events for a session; return what was printed so far (bounded)."""
        s = self._get(sid)
        s.live = True
        if s.capture is None:
            return LiveStart(**s.fields())
        # Output still queued for a live event is left out: the event will bring it.
        end = min(s.capture.written, s.capture.total - len(s.live_pending))
        data, _size = tail_lines(s.capture.path, 10_000, 4 * READ_PAGE_BYTES, end)
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
        # Backends report what they found at the end (e.g. a protected file restored).
        for notice in s.launched.notices:
            if notice not in s.notices:
                s.notices.append(notice)
        shutil.rmtree(s.tmpdir, ignore_errors=True)
        if s.timed_out:
            s.status = "timed_out"
        elif s.killed:
            s.status = "killed"
        else:
            s.status = "exited"
        self._reap_strays()
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
            self.on_event("exited", s.info())
        s.done.set()

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

    def _kill_now(self, s: Session) -> None:
        if s.running and s.launched is not None and s.tracker is not None:
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
        if not isinstance(sid, str) or sid not in self.sessions:
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

    def output(self, sid: str, tail: object = None, max_bytes: int = READ_PAGE_BYTES) -> OutputPage:
        """New output since the last read (bounded), or the last ``tail`` lines."""
        s = self._get(sid)
        if s.capture is None:
            return OutputPage(**s.fields())
        if s.pipe_r >= 0:
            self._on_readable(s)  # include what is already in the pipe
        max_line = self.config.output.max_line_chars
        max_chars = self.config.output.max_chars
        if tail is not None:
            if isinstance(tail, bool) or not isinstance(tail, int) or tail <= 0:
                raise UsageError(f"tail should be a positive number of lines, not {tail!r}")
            data, size = tail_lines(s.capture.path, tail, min(max_bytes, max_chars))
            s.read_offset = max(s.read_offset, size)
            return OutputPage(**s.fields(), output=clean_text(data, max_line))
        # A page is at most max_chars bytes, so cleaning never has to drop any of it: what is
        # not returned now stays unread for the next call.
        data, s.read_offset, left = read_since(
            s.capture.path, s.read_offset, min(max_bytes, max_chars)
        )
        return OutputPage(**s.fields(), output=clean_text(data, max_line), unread_bytes=left)

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
        shutil.rmtree(self.state_dir, ignore_errors=True)


def _connect_in_netns(port: int) -> Any:
    """A socket connected to ``port`` inside run_bash's own network namespace."""
    from run_bash.sandbox.launcher import launcher
    from run_bash.sandbox.netholder import NET_HOLDER

    netns = NET_HOLDER.fds()
    if netns is None:
        raise ConnectionRefusedError(NET_HOLDER.error)
    return launcher().connect(port, netns)
