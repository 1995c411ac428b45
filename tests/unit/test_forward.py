"""The port forwarder (``sandbox/forward.py``) on the host's real loopback, with the namespace side
stood in by a listener on the host: forwards take ports the kernel picks, never the server's own;
a restarted server gets its host port back; limits per session; forwards stop with the session.
The sandboxed side is tests/security/test_loopback.py."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from run_bash.sandbox.forward import MAX_FORWARDED_PER_SESSION, PortForwarder


class Namespace:
    """Stands in for a project's namespace: "port P inside" is a listener on the host."""

    def __init__(self) -> None:
        self.inside: dict[int, socket.socket] = {}

    def serve(self, port: int) -> socket.socket:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        self.inside[port] = s
        return s

    def connect(self, _lb: Any, port: int) -> socket.socket:
        return socket.create_connection(self.inside[port].getsockname(), timeout=5)


async def test_forwards_take_kernel_picked_ports_and_keep_them_across_a_restart():
    loop = asyncio.get_running_loop()
    ns = Namespace()
    lb = object()
    server = ns.serve(5173)
    fwd = PortForwarder(loop, ns.connect)
    try:
        notes = fwd.update({"s1": (lb, [5173])})  # type: ignore[dict-item]
        host_port = fwd.host_ports("s1")[5173]
        assert host_port != 5173
        assert notes == [("s1", f"port 5173 is forwarded to the host: 127.0.0.1:{host_port}")]

        async def through() -> bytes:
            r, w = await asyncio.open_connection("127.0.0.1", host_port)
            conn, _ = await loop.sock_accept(server)
            await loop.sock_sendall(conn, b"hi")
            conn.close()
            data = await r.read()
            w.close()
            return data

        # The server stops listening (it restarts): the forward goes, the session stays; back,
        # it gets the same host port (free again: no connection left it in TIME_WAIT).
        assert fwd.update({}, alive={"s1"}) == [] and fwd.host_ports("s1") == {}
        fwd.update({"s1": (lb, [5173])})  # type: ignore[dict-item]
        assert fwd.host_ports("s1") == {5173: host_port}
        assert await through() == b"hi"
        # The session ends: its forward and what was remembered of it go.
        fwd.update({}, alive=set())
        assert fwd._had == {}
    finally:
        fwd.close()
        server.close()


async def test_forwards_are_capped_per_session_and_say_why():
    loop = asyncio.get_running_loop()
    ns = Namespace()
    ports = list(range(8000, 8000 + MAX_FORWARDED_PER_SESSION + 2))
    for p in ports:
        ns.serve(p)
    fwd = PortForwarder(loop, ns.connect)
    lb1, lb2 = object(), object()
    try:
        notes = fwd.update({"s1": (lb1, ports), "s2": (lb2, [9000])})  # type: ignore[dict-item]
        assert len(fwd.host_ports("s1")) == MAX_FORWARDED_PER_SESSION
        refused = [t for sid, t in notes if sid == "s1" and "not forwarded" in t]
        assert len(refused) == 2 and all("ports of this session" in t for t in refused)
        # Another session still gets its own (the limit is per session, not shared).
        assert list(fwd.host_ports("s2")) == [9000]
        # Said once, not on every update.
        again = fwd.update({"s1": (lb1, ports), "s2": (lb2, [9000])})  # type: ignore[dict-item]
        assert not [t for _sid, t in again if "not forwarded" in t]
    finally:
        fwd.close()
        for s in ns.inside.values():
            s.close()


def test_a_kept_listener_socket_answers_every_time():
    """The forwarder keeps one netlink socket per namespace and asks it once a second: every
    answer lists the listeners (a kept socket must not wait out a timeout, and then give up,
    from its second use on)."""
    from run_bash.sandbox.loopback import diag_socket, namespace_listeners

    with socket.socket() as server, diag_socket() as nl:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        for _ in range(3):
            table = namespace_listeners(nl)
            assert table is not None and port in table
