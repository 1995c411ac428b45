"""Port forwarding: servers of runs in run_bash's own network namespace, reachable from the host.

Runs of both confining backends live in run_bash's loopback-only network namespace
(``netholder.py``), so a dev server an agent starts is out of the host's reach: a browser on the host
cannot open it. ``PortForwarder`` gives such a server a listening socket on the host's
``127.0.0.1`` with the same port and relays each connection into the namespace: a connection there is
made by the namespace launcher (``launcher.connect_in_netns``), never by the sandbox.

Only ports from 1024 up, outside ``WELL_KNOWN_SERVICE_PORTS`` and free on the host are forwarded:
a service of the host keeps its port, and no client of a database or a broker can reach a sandboxed
listener posing as it. At most ``MAX_FORWARDED`` at once. Forwarding stops when the port is no
longer listened on or the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from run_bash.sandbox.loopback import FIRST_UNPRIVILEGED_PORT, WELL_KNOWN_SERVICE_PORTS

FORWARD_POLL_S = 1.0
MAX_FORWARDED = 32
RELAY_CHUNK = 64 * 1024

log = logging.getLogger("run_bash")

# A blocking function that returns a socket connected to ``port`` inside the namespace.
Connector = Callable[[int], socket.socket]


@dataclass
class Forward:
    session_id: str
    sock: socket.socket
    relays: set[asyncio.Task[None]] = field(default_factory=set)


class PortForwarder:
    """The host's end of forwarded ports: one listener per port, one relay per connection. Runs
    on the host's event loop; ``update`` is called from it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connect: Connector) -> None:
        self.loop = loop
        self.connect = connect
        self.forwards: dict[int, Forward] = {}
        self._said: set[tuple[str, int]] = set()

    @property
    def ports(self) -> list[int]:
        return sorted(self.forwards)

    def update(self, wanted: Mapping[str, list[int]]) -> list[tuple[str, str]]:
        """Forward the ports in ``wanted`` (session id -> ports it listens on in the namespace)
        and stop forwarding every other one. Returns notices ``(session id, text)`` to add."""
        owner = {port: sid for sid, ports in wanted.items() for port in ports}
        for port in [p for p, f in self.forwards.items() if owner.get(p) != f.session_id]:
            self._stop(port)
        notes: list[tuple[str, str]] = []
        for port, sid in sorted(owner.items()):
            if port in self.forwards:
                continue
            why = self._refusal(port) or self._start(port, sid)
            if why is None:
                notes.append((sid, f"port {port} is forwarded to the host: 127.0.0.1:{port}"))
            elif (sid, port) not in self._said:
                notes.append((sid, f"port {port} is not forwarded to the host ({why})"))
            self._said.add((sid, port))
        return notes

    def _refusal(self, port: int) -> str | None:
        if port < FIRST_UNPRIVILEGED_PORT:
            return "below 1024"
        if port in WELL_KNOWN_SERVICE_PORTS:
            return f"the port of {WELL_KNOWN_SERVICE_PORTS[port]}"
        if len(self.forwards) >= MAX_FORWARDED:
            return f"{MAX_FORWARDED} ports are forwarded already"
        return None

    def _start(self, port: int, sid: str) -> str | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            # SO_REUSEADDR lets only connections in TIME_WAIT go (a restarted server is forwarded
            # again at once): Linux refuses a second listener on a port the host listens on.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError as e:
            sock.close()
            return "the host uses it" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        fwd = Forward(sid, sock)
        self.forwards[port] = fwd
        self.loop.add_reader(sock, self._accept, port, fwd)
        return None

    def _accept(self, port: int, fwd: Forward) -> None:
        while True:
            try:
                conn, _addr = fwd.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log.debug("forward %d: accept: %s", port, e)
                return
            conn.setblocking(False)
            task = self.loop.create_task(self._relay(port, conn))
            fwd.relays.add(task)
            task.add_done_callback(fwd.relays.discard)

    async def _relay(self, port: int, outer: socket.socket) -> None:
        inner: socket.socket | None = None
        try:
            inner = await self.loop.run_in_executor(None, self.connect, port)
            inner.setblocking(False)

            async def pump(src: socket.socket, dst: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    while data := await self.loop.sock_recv(src, RELAY_CHUNK):
                        await self.loop.sock_sendall(dst, data)
                    dst.shutdown(socket.SHUT_WR)

            await asyncio.gather(pump(outer, inner), pump(inner, outer))
        except Exception as e:  # the server went away between the poll and this connection
            log.debug("forward %d: %s", port, e)
        finally:
            for s in (outer, inner):
                if s is not None:
                    s.close()

    def _stop(self, port: int) -> None:
        fwd = self.forwards.pop(port, None)
        if fwd is None:
            return
        with contextlib.suppress(Exception):
            self.loop.remove_reader(fwd.sock)
        fwd.sock.close()
        for task in list(fwd.relays):
            task.cancel()

    def close(self) -> None:
        """Stop every forward (the host is shutting down)."""
        for port in list(self.forwards):
            self._stop(port)
