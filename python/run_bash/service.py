"""The host's service: every RPC method as a plain-Python call. No pynvim.

The rplugin adapter maps each ``run_bash.<method>`` RPC request onto a method here and forwards
``emit(name, payload)`` to Lua. Methods return at once; long work (kill, waiting for results) runs as
tasks on the loop and answers through events.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from run_bash.audit import AuditLog
from run_bash.config import parse_config
from run_bash.errors import ConfigError, RunBashError, UsageError
from run_bash.results import Wire, plain
from run_bash.sandbox.base import choose_backend, get_backend
from run_bash.sessions import SessionManager, check_cmd

log = logging.getLogger("run_bash")

Emit = Callable[[str, dict[str, Any]], None]


class Service:
    """State of one host: config, sessions, pending kills."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        emit: Emit,
        *,
        environ: Mapping[str, str] | None = None,
        state_dir: str | None = None,
    ) -> None:
        self.loop = loop
        self._emit = emit
        self.environ = dict(os.environ if environ is None else environ)
        self.config = parse_config({})
        self.notices: list[str] = []
        self._state_dir = state_dir or self.environ.get("RUN_BASH_STATE_DIR")
        self._temp_root = self.environ.get("RUN_BASH_TEMP_DIR") if state_dir is None else None
        self._mgr: SessionManager | None = None
        self.audit = AuditLog(None, 0)
        self._configure_audit()

    def _configure_audit(self) -> None:
        cfg = self.config.audit
        self.audit = AuditLog(self.environ.get("RUN_BASH_AUDIT"), cfg.max_bytes, cfg.enabled)

    def emit(self, name: str, event: Wire | dict[str, Any]) -> None:
        """Forward an event to Lua as plain data; finished runs also go to the audit log."""
        payload = event.to_wire() if isinstance(event, Wire) else event
        status = payload.get("status")
        finished = (name == "result" and status != "running") or name == "exited"
        if finished and status not in ("rejected", "cancelled"):  # those never ran: no run line
            self.audit.run(payload)
        self._emit(name, payload)

    @property
    def mgr(self) -> SessionManager:
        if self._mgr is None:
            self._mgr = SessionManager(
                self.config,
                loop=self.loop,
                on_event=self.emit,
                state_dir=self._state_dir,
                temp_root=self._temp_root,
                environ=self.environ,
            )
        return self._mgr

    # -- configuration -------------------------------------------------------------------------------

    def setup(self, opts: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate and apply the user's options; return notices and the backend in use.

        Problems that would make every run fail (a bad option, a sandlock profile that does not
        exist, extra bwrap arguments bwrap rejects) raise one ConfigError naming each; the
        previous configuration then stays in force.
        """
        config = parse_config(opts)
        chosen = choose_backend(config.sandbox.backend, lambda name: get_backend(name, config))
        problems = chosen.backend.validate()
        if problems:
            raise ConfigError(problems)
        self.config = config
        self._configure_audit()
        if self._mgr is not None:
            self._mgr.configure(config)
        notices = list(config.notices)
        chosen = self.mgr.choice()
        notices.extend(chosen.backend.warnings())
        out = {
            "notices": notices,
            "backend": chosen.backend.name,
            "unavailable": chosen.unavailable,
            "chosen_because": chosen.reason,
        }
        if chosen.error:
            out["backend_error"] = chosen.error
        return out

    # -- approval decision ---------------------------------------------------------------------------

    def check(self, cmd: object, opts: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The pause-list verdict for ``cmd`` plus where it would run."""
        cmd = check_cmd(cmd)
        from run_bash.checker import check

        opts = opts or {}
        verdict = check(cmd, self.config.pauselist).to_dict()
        skip = bool(opts.get("skip_sandbox"))
        backend, why = self.mgr.resolve_backend("none" if skip else None)
        verdict.update(
            backend=backend.name,
            sandboxed=bool(backend.isolates),
            unavailable=why,
            # How the backend was chosen ("auto: sandlock works here (…)"), for the agent's tool
            # description and the approval prompt.
            chosen_because=self.mgr.choice("none" if skip else None).reason,
        )
        return verdict

    # -- runs ------------------------------------------------------------------------------------------

    def run(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Start a command; the result arrives as a ``result`` event.

        The pause list is enforced here, whoever calls. Unless the caller has already asked the
        user where needed (``approved``; ``unsandboxed_ok``, the user's consent to run without a
        sandbox, implies it), a command that the pause list flags, that would run without a
        sandbox, that Lua-function rules must judge, or that comes with ``ask`` is held (status
        ``awaiting_approval``) and an ``approve`` event asks Lua; the user's answer comes back
        through ``decide``. Nothing is started before that.
        """
        if not isinstance(spec, Mapping):
            raise UsageError("run expects a table")
        unknown = sorted(set(spec) - RUN_OPTIONS)
        if unknown:
            raise UsageError(f"unknown run option(s): {', '.join(map(str, unknown))}")
        cmd = check_cmd(spec.get("cmd"))
        skip = bool(spec.get("skip_sandbox"))
        approved = bool(spec.get("approved") or spec.get("unsandboxed_ok"))
        kwargs: dict[str, Any] = {
            "cwd": spec.get("cwd"),
            "timeout": spec.get("timeout"),
            "bg_after": spec.get("bg_after") or 0,
            "skip_sandbox": skip,
            "live": bool(spec.get("live")),
        }
        if approved:
            unsandboxed_ok = bool(spec.get("unsandboxed_ok"))
            return (
                self.mgr.start(cmd, unsandboxed_ok=unsandboxed_ok, defer=True, **kwargs)
                .info()
                .to_wire()
            )
        verdict = self.check(cmd, {"skip_sandbox": skip})
        held = (
            bool(spec.get("ask"))
            or verdict["pause"]
            or not verdict["sandboxed"]
            or bool(verdict.get("lua_rules"))
        )
        if not held:
            s = self.mgr.start(cmd, defer=True, **kwargs)
            self.audit.decision(
                {
                    **verdict,
                    "cmd": cmd,
                    "cwd": s.cwd,
                    "decided_by": "auto",
                    "source": "user",
                    "session_id": s.id,
                }
            )
            return s.info().to_wire()
        s = self.mgr.start(cmd, hold=True, **kwargs)
        self.emit(
            "approve",
            {
                "id": s.id,
                "cmd": cmd,
                "cwd": s.cwd,
                "verdict": verdict,
                "ask": bool(spec.get("ask")),
            },
        )
        return s.info().to_wire()

    def decide(self, sid: object, decision: object, reason: object = None) -> bool:
        """The user's answer for a held run: "accept" / "always" / "auto" start it, "reject" and
        "cancel" drop it. A decision for a run that is no longer held is ignored (False)."""
        if decision in ("accept", "always", "auto"):
            return self.mgr.release(sid)
        if decision in ("reject", "cancel"):
            why = reason if isinstance(reason, str) and reason.strip() else None
            return self.mgr.refuse(sid, str(decision), why)
        raise UsageError(f"unknown decision {decision!r}")

    def kill(self, sid: object, token: object = None) -> dict[str, Any]:
        """Start killing a session; the outcome arrives as a ``reply`` event with ``token``."""
        session = self.mgr._get(sid)
        info = session.info().to_wire()
        self.loop.create_task(self._reply(token, self.mgr.kill(session.id)))
        return info

    def kill_all(self, token: object = None) -> dict[str, Any]:
        """Start killing every running session."""
        running = [s.id for s in self.mgr.sessions.values() if s.running]
        self.loop.create_task(self._reply(token, self.mgr.kill_all()))
        return {"count": len(running)}

    async def _reply(self, token: object, coro: Any) -> None:
        try:
            result = await coro
            payload: dict[str, Any] = {"token": token, "result": plain(result)}
        except RunBashError as err:
            payload = {"token": token, "error": str(err)}
        except Exception as err:  # reported, never raised into the loop
            log.exception("internal error")
            payload = {"token": token, "error": f"internal error: {err}"}
        self.emit("reply", payload)

    def sessions(self) -> list[dict[str, Any]]:
        return [info.to_wire() for info in self.mgr.list()]

    def output(self, sid: object, opts: Mapping[str, Any] | None = None) -> dict[str, Any]:
        opts = opts or {}
        return self.mgr.output(sid, tail=opts.get("tail")).to_wire()  # type: ignore[arg-type]

    def watch(self, sid: object) -> dict[str, Any]:
        return self.mgr.watch(sid).to_wire()  # type: ignore[arg-type]

    def pin(self, sid: object, reason: object) -> dict[str, Any]:
        """Keep a session in the history for ``reason`` (an open output buffer) until ``unpin``."""
        return self.mgr.pin(sid, reason).to_wire()

    def unpin(self, sid: object, reason: object) -> bool:
        return self.mgr.unpin(sid, reason)

    # -- health and policy ------------------------------------------------------------------------------

    def health(self) -> list[dict[str, str]]:
        from run_bash.health import report

        return report(self.config, self.mgr)

    def record_decision(self, record: Mapping[str, Any]) -> bool:
        """Write an approval decision made in Lua to the audit log."""
        if not isinstance(record, Mapping):
            raise UsageError("audit expects a table")
        self.audit.decision(record)
        return True

    def rule_defaults(self) -> dict[str, list[str]]:
        """The built-in ``sandbox.rules`` lists, for ``function(defaults)`` rules evaluated in Lua."""
        from run_bash.sandbox.policy import default_rules

        return default_rules()

    def shutdown_now(self) -> None:
        """Kill everything at once (VimLeavePre); the host exits soon after."""
        if self._mgr is not None:
            self._mgr.close_now()


RUN_OPTIONS = frozenset(
    {
        "cmd",
        "cwd",
        "timeout",
        "bg_after",
        "skip_sandbox",
        "approved",
        "unsandboxed_ok",
        "ask",
        "live",
    }
)
