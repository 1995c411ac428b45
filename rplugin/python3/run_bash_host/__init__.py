"""pynvim adapter of run_bash: the only module that imports pynvim.

Each ``run_bash.<method>`` RPC request maps onto ``run_bash.service.Service``; events go back to Lua
with ``require('run_bash')._on_event(name, payload)`` as asynchronous notifications. Nothing runs at
import time, so a global ``:UpdateRemotePlugins`` that scans this directory stays harmless.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import pynvim

log = logging.getLogger("run_bash")

EVENT_LUA = "require('run_bash')._on_event(...)"


def boundary(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn core errors into ``{"error": msg}`` answers; log and summarise anything unexpected."""

    @functools.wraps(fn)
    def wrapper(self: RunBashHost, *args: Any) -> Any:
        from run_bash.errors import RunBashError

        try:
            return {"ok": fn(self, *args)}
        except RunBashError as err:
            return {"error": str(err)}
        except Exception as err:
            log.exception("internal error in %s", fn.__name__)
            return {"error": f"internal error in {fn.__name__}: {err} (details in the log)"}

    return wrapper


@pynvim.plugin
class RunBashHost:
    """RPC surface of the host. Handlers validate, schedule and return at once."""

    def __init__(self, nvim: pynvim.Nvim) -> None:
        self.nvim = nvim
        self._service: Any = None

    @property
    def service(self) -> Any:
        if self._service is None:
            from run_bash.service import Service

            self._service = Service(self.nvim.loop, self._emit)
        return self._service

    def _emit(self, name: str, payload: dict[str, Any]) -> None:
        try:
            self.nvim.exec_lua(EVENT_LUA, name, payload, async_=True)
        except Exception:
            log.exception("could not send event %s", name)

    @pynvim.rpc_export("run_bash.ping", sync=True)
    def ping(self, *args: Any) -> Any:
        return "pong"

    @pynvim.rpc_export("run_bash.setup", sync=True)
    @boundary
    def setup(self, opts: Any = None) -> Any:
        return self.service.setup(opts)

    @pynvim.rpc_export("run_bash.check", sync=True)
    @boundary
    def check(self, cmd: Any = None, opts: Any = None) -> Any:
        return self.service.check(cmd, opts)

    @pynvim.rpc_export("run_bash.run", sync=True)
    @boundary
    def run(self, spec: Any = None) -> Any:
        return self.service.run(spec)

    @pynvim.rpc_export("run_bash.decide", sync=False)
    def decide(self, sid: Any = None, decision: Any = None, reason: Any = None) -> None:
        """The user's answer for a held run (a notification: nothing to answer)."""
        from run_bash.errors import RunBashError

        try:
            self.service.decide(sid, decision, reason)
        except RunBashError as err:
            log.warning("decide: %s", err)
        except Exception:
            log.exception("internal error in decide")

    @pynvim.rpc_export("run_bash.kill", sync=True)
    @boundary
    def kill(self, sid: Any = None, token: Any = None) -> Any:
        return self.service.kill(sid, token)

    @pynvim.rpc_export("run_bash.kill_all", sync=True)
    @boundary
    def kill_all(self, token: Any = None) -> Any:
        return self.service.kill_all(token)

    @pynvim.rpc_export("run_bash.sessions", sync=True)
    @boundary
    def sessions(self) -> Any:
        return self.service.sessions()

    @pynvim.rpc_export("run_bash.output", sync=True)
    @boundary
    def output(self, sid: Any = None, opts: Any = None) -> Any:
        return self.service.output(sid, opts)

    @pynvim.rpc_export("run_bash.watch", sync=True)
    @boundary
    def watch(self, sid: Any = None) -> Any:
        return self.service.watch(sid)

    @pynvim.rpc_export("run_bash.pin", sync=True)
    @boundary
    def pin(self, sid: Any = None, reason: Any = None) -> Any:
        return self.service.pin(sid, reason)

    @pynvim.rpc_export("run_bash.unpin", sync=False)
    def unpin(self, sid: Any = None, reason: Any = None) -> None:
        """A buffer that kept a session is gone (a notification: sent from BufWipeout)."""
        try:
            self.service.unpin(sid, reason)
        except Exception:
            log.exception("internal error in unpin")

    @pynvim.rpc_export("run_bash.health", sync=True)
    @boundary
    def health(self) -> Any:
        return self.service.health()

    @pynvim.rpc_export("run_bash.audit", sync=True)
    @boundary
    def audit(self, record: Any = None) -> Any:
        return self.service.record_decision(record)

    @pynvim.rpc_export("run_bash.rule_defaults", sync=True)
    @boundary
    def rule_defaults(self) -> Any:
        return self.service.rule_defaults()

    @pynvim.rpc_export("run_bash.shutdown", sync=True)
    @boundary
    def shutdown(self) -> Any:
        self.service.shutdown_now()
        return True
