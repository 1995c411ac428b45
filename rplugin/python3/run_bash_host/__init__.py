"""The host's RPC surface: each ``run_bash.<method>`` request maps onto
``run_bash.service.Service``; events go back to Lua with ``require('run_bash')._on_event(name,
payload)`` as asynchronous notifications (``nvim_exec_lua``).

The host speaks msgpack-RPC itself (``channel.py``, started by ``start.py``): it is not a pynvim
remote plugin, and nothing here registers one, so a global ``:UpdateRemotePlugins`` that scans this
directory finds nothing to load and stays harmless. Nothing runs at import time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

    from run_bash.service import Service

log = logging.getLogger("run_bash")

EVENT_LUA = "require('run_bash')._on_event(...)"


_F = TypeVar("_F", bound=Callable[..., Any])


def rpc_export(name: str, *, sync: bool) -> Callable[[_F], _F]:
    """Mark a method of :class:`RunBashHost` as the handler of ``name``: a request (``sync``,
    answered with its return value) or a notification (answered with nothing)."""

    def mark(fn: _F) -> _F:
        fn._rpc_export = (name, sync)  # type: ignore[attr-defined]
        return fn

    return mark


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


class RunBashHost:
    """RPC surface of the host. Handlers validate, schedule and return at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop, notify: Callable[..., None]) -> None:
        self.loop = loop
        self._notify = notify
        self._service: Service | None = None

    def handlers(self) -> tuple[dict[str, Callable[..., Any]], dict[str, Callable[..., Any]]]:
        """The bound handlers by RPC name: (requests, notifications)."""
        requests: dict[str, Callable[..., Any]] = {}
        notifications: dict[str, Callable[..., Any]] = {}
        for attr, value in vars(type(self)).items():
            spec = getattr(value, "_rpc_export", None)
            if spec is not None:
                name, sync = spec
                (requests if sync else notifications)[name] = getattr(self, attr)
        return requests, notifications

    @property
    def service(self) -> Service:
        if self._service is None:
            from run_bash.service import Service

            self._service = Service(self.loop, self._emit)
        return self._service

    def _emit(self, name: str, payload: dict[str, Any]) -> None:
        try:
            self._notify("nvim_exec_lua", EVENT_LUA, [name, payload])
        except Exception:
            log.exception("could not send event %s", name)

    @rpc_export("run_bash.ping", sync=True)
    def ping(self, *args: Any) -> Any:
        return "pong"

    def _call(self, method: str, args: tuple[Any, ...]) -> Any:
        return self.service.rpc(method, args)

    @rpc_export("run_bash.hello", sync=False)
    def hello(self, *args: Any) -> None:
        """A notification from Lua right after it started the host: answer with ``ready``."""
        try:
            self._call("hello", args)
        except Exception:
            log.exception("internal error in hello")
            # Runs queued in Lua wait for ``ready``: they are sent now and get the error itself
            # (from setup, or their own request), not a timeout.
            self._emit("ready", {})

    @rpc_export("run_bash.setup", sync=True)
    @boundary
    def setup(self, *args: Any) -> Any:
        return self._call("setup", args)

    @rpc_export("run_bash.check", sync=True)
    @boundary
    def check(self, *args: Any) -> Any:
        return self._call("check", args)

    @rpc_export("run_bash.tool_args", sync=True)
    @boundary
    def tool_args(self, *args: Any) -> Any:
        return self._call("tool_args", args)

    @rpc_export("run_bash.facts", sync=True)
    @boundary
    def facts(self, *args: Any) -> Any:
        return self._call("facts", args)

    @rpc_export("run_bash.run", sync=True)
    @boundary
    def run(self, *args: Any) -> Any:
        return self._call("run", args)

    @rpc_export("run_bash.decide", sync=False)
    def decide(self, *args: Any) -> None:
        """The user's answer for a held run (a notification: nothing to answer)."""
        from run_bash.errors import RunBashError

        try:
            self._call("decide", args)
        except RunBashError as err:
            log.warning("decide: %s", err)
        except Exception:
            log.exception("internal error in decide")

    @rpc_export("run_bash.kill", sync=True)
    @boundary
    def kill(self, *args: Any) -> Any:
        return self._call("kill", args)

    @rpc_export("run_bash.kill_all", sync=True)
    @boundary
    def kill_all(self, *args: Any) -> Any:
        return self._call("kill_all", args)

    @rpc_export("run_bash.sessions", sync=True)
    @boundary
    def sessions(self, *args: Any) -> Any:
        return self._call("sessions", args)

    @rpc_export("run_bash.output", sync=True)
    @boundary
    def output(self, *args: Any) -> Any:
        return self._call("output", args)

    @rpc_export("run_bash.wait", sync=True)
    @boundary
    def wait(self, *args: Any) -> Any:
        return self._call("wait", args)

    @rpc_export("run_bash.watch", sync=True)
    @boundary
    def watch(self, *args: Any) -> Any:
        return self._call("watch", args)

    @rpc_export("run_bash.pin", sync=True)
    @boundary
    def pin(self, *args: Any) -> Any:
        return self._call("pin", args)

    @rpc_export("run_bash.unpin", sync=False)
    def unpin(self, *args: Any) -> None:
        """A buffer that kept a session is gone (a notification: sent from BufWipeout)."""
        try:
            self._call("unpin", args)
        except Exception:
            log.exception("unpin failed")

    @rpc_export("run_bash.health", sync=True)
    @boundary
    def health(self, *args: Any) -> Any:
        return self._call("health", args)

    @rpc_export("run_bash.rule_defaults", sync=True)
    @boundary
    def rule_defaults(self, *args: Any) -> Any:
        return self._call("rule_defaults", args)

    @rpc_export("run_bash.changes", sync=True)
    @boundary
    def changes(self, *args: Any) -> Any:
        return self._call("changes", args)

    @rpc_export("run_bash.diff", sync=True)
    @boundary
    def diff(self, *args: Any) -> Any:
        return self._call("diff", args)

    @rpc_export("run_bash.plan", sync=True)
    @boundary
    def plan(self, *args: Any) -> Any:
        return self._call("plan", args)

    @rpc_export("run_bash.undo", sync=True)
    @boundary
    def undo(self, *args: Any) -> Any:
        return self._call("undo", args)

    @rpc_export("run_bash.undo_runs", sync=True)
    @boundary
    def undo_runs(self, *args: Any) -> Any:
        return self._call("undo_runs", args)

    @rpc_export("run_bash.undo_usage", sync=True)
    @boundary
    def undo_usage(self, *args: Any) -> Any:
        return self._call("undo_usage", args)

    @rpc_export("run_bash.shutdown", sync=True)
    @boundary
    def shutdown(self, *args: Any) -> Any:
        return self._call("shutdown", args)
