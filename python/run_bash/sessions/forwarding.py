"""Forwarding the servers of running sessions in run_bash's own network namespace to the host's
loopback (``sandbox/forward.py``), so a browser on the host still reaches the agent's dev server."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Mapping

from run_bash.config import Config
from run_bash.sandbox.forward import FORWARD_POLL_S, PortForwarder
from run_bash.sessions.session import Session


class Forwarding:
    """The forwards of one host's sessions: updated now, then every ``FORWARD_POLL_S`` while a
    session runs."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sessions: Mapping[str, Session],
        config: Callable[[], Config],
    ) -> None:
        self.loop = loop
        self.sessions = sessions
        self._config = config
        self._forwarder: PortForwarder | None = None
        self._timer: asyncio.TimerHandle | None = None

    def update(self, later: bool = False) -> None:
        """Forward the ports that running sessions in run_bash's own network namespace listen on
        to the host's loopback: now, then every ``FORWARD_POLL_S`` while a session runs;
        ``later``: only make sure it is scheduled."""
        if later and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        if not self._config().sandbox.network.forward_ports:
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
                    self._forwarder = PortForwarder(self.loop, connect_in_netns)
                for sid, text in self._forwarder.update(wanted):
                    self.sessions[sid].notices.append(text)
        if any(s.running for s in self.sessions.values()):
            self._timer = self.loop.call_later(FORWARD_POLL_S, self.update)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._forwarder is not None:
            self._forwarder.close()


def connect_in_netns(port: int) -> socket.socket:
    """A socket connected to ``port`` inside run_bash's own network namespace."""
    from run_bash.sandbox.launcher import launcher
    from run_bash.sandbox.netholder import NET_HOLDER

    netns = NET_HOLDER.fds()
    if netns is None:
        raise ConnectionRefusedError(NET_HOLDER.error)
    return launcher().connect(port, netns)
