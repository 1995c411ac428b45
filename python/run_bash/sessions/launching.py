"""Launching a run: its policy and the guard of what the host reads from its project (prepared off
the loop), then its temp dir, output file and pipe, its environment, and the backend's spawn."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from run_bash.config import Config
from run_bash.output import Capture, OutputBudget
from run_bash.sandbox import proc
from run_bash.sandbox.base import RunSpec
from run_bash.sandbox.guard import Keeper, Scope
from run_bash.sandbox.hostread import RulesName
from run_bash.sandbox.policy import Policy, build_env, build_policy
from run_bash.sessions.session import Session
from run_bash.sessions.tempspace import TempSpace

if TYPE_CHECKING:
    from run_bash.run_changes import RunChanges

PIPE_SIZE = 1024 * 1024

Prepared = tuple[Policy | None, Scope | None]


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
        # CodeCompanion's rules files and per-project config (sent from Lua at setup).
        self.agent_rules: tuple[RulesName, ...] = ()
        self.project_config: tuple[str, ...] = ()
        self._warned: set[str] = set()

    def prepare(self, s: Session) -> Prepared:
        """The run's policy and the guard of what the host reads from its project. Host I/O
        (git, the project's files): never on the loop for a deferred run. Raises on failure."""
        if not s.backend.isolates:
            return None, None
        s.mark("prepare")
        # Ports served by this host's own descendants (earlier sessions) stay reachable; the policy
        # finds them in the same listener scan it uses to block other local services.
        policy = build_policy(
            self._config(),
            s.cwd,
            env=self.environ,
            discovery=self.keeper.discovery,
            agent_rules=self.agent_rules,
            project_files=self.project_config,
            untrusted=self.keeper.untrusted(),
            # The change store is never reachable from inside, whatever the rules grant.
            hidden=self.changes.private_paths() if self.changes is not None else (),
            on_stage=s.mark,
        )
        s.mark("policy")
        assert policy.host_read is not None
        scope = self.keeper.prepare(s.id, policy.host_read)
        s.mark("guard")
        return policy, scope

    def spawn(self, s: Session, prepared: Prepared) -> None:
        """Build the run's files and environment, and spawn it: ``s`` gets its temp dir, capture,
        pipe (``pipe_r``), launched process and tracker. Raises on failure (nothing is left)."""
        sid, backend = s.id, s.backend
        s.mark("spawn")
        config = self._config()
        self.temp.make(s)
        out_path = os.path.join(self.state_dir, f"{sid}.log")
        r = w = -1
        try:
            s.capture = Capture(out_path, config.output.file_cap, budget=self._budget())
            self._report_stop(s)
            r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, 1031, PIPE_SIZE)  # F_SETPIPE_SZ: fewer wake-ups for chatty commands
            # The write end must block: a command writing faster than we read should wait, not fail.
            os.set_blocking(w, True)
            env, dropped = build_env(config, tmpdir=s.tmpdir, session_id=sid, base_env=self.environ)
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
            s.mark("files")
            s.launched = backend.spawn(spec)
            s.mark("spawned")
            for stage, at in s.launched.stages.items():
                s.marks.setdefault(stage, at)
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
            prepared[1].attach(lambda: self._on_tamper(s))
        s.notices.extend(s.launched.notices)
