"""Port forwarding: servers of runs in their project's network namespace, reachable from the host.

Runs of both confining backends live in their project's loopback-only network namespace
(``netholder.py``), so a dev server an agent starts is out of the host's reach: a browser on the
host cannot open it. ``PortForwarder`` gives such a server a listening socket on the host's
``127.0.0.1`` on a port **the kernel picks** (bind to port 0: an ephemeral port, never one of
``net.ipv4.ip_local_reserved_ports``) and relays each connection into the namespace: a connection
there is made by the namespace launcher (``launcher.connect``), never by the sandbox. The session's
notice, its ``forwarded`` field (``list``, results, ``:RunBashSessions``) name that host port.

No port number a user service may need is ever taken: a service of the host started later finds
its own port free, and none of its clients can reach a sandboxed listener posing as it. A port the
session's server used before (it restarted) gets the same host port again when that is still free.

At most ``MAX_FORWARDED_PER_SESSION`` ports of one session and ``MAX_FORWARDED`` of all sessions
are forwarded at once. Forwarding stops when the port is no longer listened on or the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from run_bash.sandbox.netholder import Loopback

# How often the namespaces of running sessions are asked which ports are listened on (one netlink
# dump per namespace; processes are looked at only when that answer changed).
FORWARD_POLL_S = 1.0
# Ports forwarded at once: of one session, and of all sessions of the host.
MAX_FORWARDED_PER_SESSION = 8
MAX_FORWARDED = 32
RELAY_CHUNK = 64 * 1024
FORWARD_ADDRESS = "127.0.0.1"

log = logging.getLogger("run_bash")

# A blocking function that returns a socket connected to ``port`` inside a namespace.
Connector = Callable[["Loopback", int], socket.socket]


@dataclass
class Forward:
    """One forwarded port of a session's server: its listener on the host and its relays."""

    session_id: str
    port: int  # where the session's server listens, in its namespace
    host_port: int  # where the host reaches it, on FORWARD_ADDRESS
    loopback: Loopback
    sock: socket.socket
    relays: set[asyncio.Task[None]] = field(default_factory=set)


class PortForwarder:
    """The host's end of forwarded ports: one listener per forwarded port, one relay per
    connection. Runs on the host's event loop; ``update`` is called from it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connect: Connector) -> None:
        self.loop = loop
        self.connect = connect
        self.forwards: dict[tuple[str, int], Forward] = {}
        self._said: set[tuple[str, int]] = set()
        # The host port each (session, port) had: given again when its server comes back.
        self._had: dict[tuple[str, int], int] = {}

    def host_ports(self, sid: str) -> dict[int, int]:
        """Session ``sid``'s forwarded ports: port in its namespace -> host port."""
        return {f.port: f.host_port for (s, _p), f in self.forwards.items() if s == sid}

    def update(
        self, wanted: Mapping[str, tuple[Loopback, list[int]]], alive: Set[str] | None = None
    ) -> list[tuple[str, str]]:
        """Forward the ports in ``wanted`` (session id -> its namespace and the ports it listens
        on there) and stop forwarding every other one. ``alive``: the sessions still running
        (default: those in ``wanted``); what is remembered of the others goes. Returns notices
        ``(session id, text)``."""
        alive = set(wanted) if alive is None else alive
        want = {(sid, port): loop for sid, (loop, ports) in wanted.items() for port in ports}
        for key in [k for k, f in self.forwards.items() if want.get(k) is not f.loopback]:
            self._stop(key)
        for key in [k for k in self._had if k[0] not in alive]:
            del self._had[key]
        notes: list[tuple[str, str]] = []
        for (sid, port), loopback in sorted(want.items(), key=lambda kv: kv[0]):
            if (sid, port) in self.forwards:
                continue
            why = self._refusal(sid) or self._start(sid, port, loopback)
            if why is None:
                host_port = self.forwards[(sid, port)].host_port
                notes.append(
                    (sid, f"port {port} is forwarded to the host: {FORWARD_ADDRESS}:{host_port}")
                )
            elif (sid, port) not in self._said:
                notes.append((sid, f"port {port} is not forwarded to the host ({why})"))
            self._said.add((sid, port))
        self._said = {k for k in self._said if k[0] in alive}
        return notes

    def _refusal(self, sid: str) -> str | None:
        mine = sum(1 for s, _p in self.forwards if s == sid)
        if mine >= MAX_FORWARDED_PER_SESSION:
            return f"{MAX_FORWARDED_PER_SESSION} ports of this session are forwarded already"
        if len(self.forwards) >= MAX_FORWARDED:
            return f"{MAX_FORWARDED} ports are forwarded already"
        return None

    def _listen(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind((FORWARD_ADDRESS, port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    def _start(self, sid: str, port: int, loopback: Loopback) -> str | None:
        sock = None
        had = self._had.get((sid, port))
        if had is not None:
            with contextlib.suppress(OSError):
                sock = self._listen(had)
        if sock is None:
            try:
                sock = self._listen(0)  # the kernel picks a free ephemeral port
            except OSError as e:
                return e.strerror or str(e)
        fwd = Forward(sid, port, int(sock.getsockname()[1]), loopback, sock)
        self.forwards[(sid, port)] = fwd
        self._had[(sid, port)] = fwd.host_port
        self.loop.add_reader(sock, self._accept, fwd)
        return None

    def _accept(self, fwd: Forward) -> None:
        while True:
            try:
                conn, _addr = fwd.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.debug("forward %d: accept: %s", fwd.port, e)
                return
            conn.setblocking(False)
            task = self.loop.create_task(self._relay(fwd, conn))
            fwd.relays.add(task)
            task.add_done_callback(fwd.relays.discard)

    async def _relay(self, fwd: Forward, outer: socket.socket) -> None:
        inner: socket.socket | None = None
        try:
            inner = await self.loop.run_in_executor(None, self.connect, fwd.loopback, fwd.port)
            inner.setblocking(False)

            async def pump(src: socket.socket, dst: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    while data := await self.loop.sock_recv(src, RELAY_CHUNK):
                        await self.loop.sock_sendall(dst, data)
                    dst.shutdown(socket.SHUT_WR)

            await asyncio.gather(pump(outer, inner), pump(inner, outer))
        except Exception as e:  # the server went away between the poll and this connection
            log.debug("forward %d: %s", fwd.port, e)
        finally:
            for s in (outer, inner):
                if s is not None:
                    s.close()

    def _stop(self, key: tuple[str, int]) -> None:
        fwd = self.forwards.pop(key, None)
        if fwd is None:
            return
        with contextlib.suppress(Exception):
            self.loop.remove_reader(fwd.sock)
        fwd.sock.close()
        for task in list(fwd.relays):
            task.cancel()

    def close(self) -> None:
        """Stop every forward (the host is shutting down)."""
        for key in list(self.forwards):
            self._stop(key)
