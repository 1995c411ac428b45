"""Forwarding the servers of running sessions in their project's network namespace to the host's
loopback (``sandbox/forward.py``), so a browser on the host still reaches the agent's dev server."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Mapping

from run_bash.config import Config
from run_bash.sandbox.forward import FORWARD_POLL_S, PortForwarder
from run_bash.sandbox.loopback import namespace_listeners, socket_inodes
from run_bash.sandbox.netholder import Loopback
from run_bash.sessions.session import Session

# Listening sockets of one namespace: (port, inode) pairs.
Table = frozenset[tuple[int, int]]


class Forwarding:
    """The forwards of one host's sessions: updated now, then every ``FORWARD_POLL_S`` while a
    session runs in a project's network namespace.

    Each tick asks every such namespace for its listeners (one netlink dump, ``Loopback.diag``);
    only when that answer changed are the sessions' processes looked at to learn whose they are.
    """

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
        # Per namespace: the sessions and listeners last seen, and whose ports they were.
        self._seen: dict[str, tuple[frozenset[str], Table, dict[str, list[int]]]] = {}

    def update(self, later: bool = False) -> None:
        """Forward the ports that running sessions in their project's network namespace listen
        on to the host's loopback: now, then every ``FORWARD_POLL_S`` while such a session runs;
        ``later``: only make sure it is scheduled."""
        if later and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        if not self._config().sandbox.network.forward_ports:
            return
        groups: dict[str, tuple[Loopback, list[Session]]] = {}
        for s in self.sessions.values():
            lb = s.launched.loopback if s.running and s.launched is not None else None
            if lb is not None:
                groups.setdefault(lb.key, (lb, []))[1].append(s)
        if not later:
            wanted: dict[str, tuple[Loopback, list[int]]] = {}
            for key, (lb, members) in groups.items():
                for sid, ports in self._ports(key, lb, members).items():
                    wanted[sid] = (lb, ports)
            self._seen = {k: v for k, v in self._seen.items() if k in groups}
            if wanted or self._forwarder is not None:
                if self._forwarder is None:
                    self._forwarder = PortForwarder(self.loop, connect_in_netns)
                alive = {s.id for _lb, members in groups.values() for s in members}
                for sid, text in self._forwarder.update(wanted, alive):
                    self.sessions[sid].notices.append(text)
                for s in self.sessions.values():
                    s.forwarded = self._forwarder.host_ports(s.id) if s.running else {}
        if groups:
            self._timer = self.loop.call_later(FORWARD_POLL_S, self.update)

    def _ports(self, key: str, lb: Loopback, members: list[Session]) -> dict[str, list[int]]:
        """The ports each of ``members`` (sessions in namespace ``lb``) listens on."""
        nl = lb.diag(diag_socket_in)
        table = namespace_listeners(nl) if nl is not None else None
        if table is None:  # netlink does not answer: the sessions' own views (/proc)
            return {s.id: list(s.ports()) for s in members}
        now: Table = frozenset((p, i) for p, inodes in table.items() for i in inodes)
        sids = frozenset(s.id for s in members)
        seen = self._seen.get(key)
        if seen is not None and seen[0] == sids and seen[1] == now:
            return seen[2]
        owners: dict[str, list[int]] = {}
        found: set[tuple[int, int]] = set()
        if now:
            for s in members:
                if s.tracker is None:
                    continue
                mine = socket_inodes(s.tracker.members())
                held = {(p, i) for p, i in now if i in mine}
                found |= held
                if held:
                    owners[s.id] = sorted({p for p, _i in held})
        if found == now:  # every listener is someone's: the answer holds until the table changes
            self._seen[key] = (sids, now, owners)
        else:
            self._seen.pop(key, None)
        return owners

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._forwarder is not None:
            self._forwarder.close()


def diag_socket_in(netns: tuple[int, int]) -> socket.socket:
    """A netlink socket made inside the network namespace ``netns`` (by the launcher)."""
    from run_bash.sandbox.launcher import launcher

    return launcher().diag(netns)


def connect_in_netns(lb: Loopback, port: int) -> socket.socket:
    """A socket connected to ``port`` inside the network namespace ``lb``."""
    from run_bash.errors import SpawnError
    from run_bash.sandbox.launcher import launcher

    try:
        fds = lb.dup()
    except (OSError, SpawnError) as e:
        raise ConnectionRefusedError(str(e)) from e
    try:
        return launcher().connect(port, fds)
    finally:
        for fd in fds:
            os.close(fd)
