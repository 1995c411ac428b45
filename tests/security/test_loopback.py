"""Loopback is decided when a connection happens, not when a run starts (#15 class 8), for every
confining backend, through the product's spawn path.

- A host service started AFTER a run began is unreachable from that run.
- A sandboxed listener on a port a host client expects never receives the client's connection.
- A background session's server stays reachable from later runs, of both backends.
- Servers of sessions are forwarded to the host's loopback on ports the kernel picks (#20 class
  6): the server's own port number stays free on the host, for the user's services.

sandlock runs in the host's network (``network.allow_local_ports`` set) get the same checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from run_bash.sandbox.forward import MAX_FORWARDED_PER_SESSION
from run_bash.sandbox.loopback import WELL_KNOWN_SERVICE_PORTS
from tests.security.conftest import CONTROL, Runner, listening_tcp

# A command that waits for the file `go` in the project, then connects to the port written in
# it and says whether it got through; its positive control connects to a listener it starts
# itself first.
LATE_CLIENT = """python3 - <<'EOF'
import os, socket, time
l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)
c = socket.create_connection(('127.0.0.1', l.getsockname()[1]), timeout=3); print('CONTROL-OK')
print('READY', flush=True)
while not os.path.exists('go'):
    time.sleep(0.02)
port = int(open('go').read())
try:
    s = socket.create_connection(('127.0.0.1', port), timeout=3); s.send(b'hello')
    print('CONNECTED')
except OSError as e:
    print('refused', e)
EOF"""

# A sandboxed server: accepts connections on {port} and prints what each one sent. One string per
# print: `python3 -u` writes print's pieces one by one, and a reader may see the first alone.
SERVER = """python3 -u - <<'EOF'
import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    l.bind(('127.0.0.1', {port})); l.listen(8)
except OSError as e:
    print('BIND-FAILED ' + str(e.errno), flush=True); raise SystemExit
print('LISTENING', flush=True)
while True:
    c, _ = l.accept(); c.settimeout(1)
    try:
        print('GOT ' + repr(c.recv(100)), flush=True)
    except OSError:
        print('GOT nothing', flush=True)
    c.close()
EOF"""

CLIENT = """python3 -c "import socket; s=socket.create_connection(('127.0.0.1', {port}), timeout=3); \
s.send(b'{text}'); print('SENT')" """

HOST_MODE = {"sandbox": {"network": {"allow_local_ports": [1]}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def in_loop(runner: Runner, fn: Callable[[], Any]) -> Any:
    """Run the blocking ``fn`` while ``runner``'s loop runs (forwarded connections are relayed
    on it)."""
    return runner.loop.run_until_complete(runner.loop.run_in_executor(None, fn))


def host_client(port: int, text: bytes = b"password") -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            s.sendall(text)
            s.shutdown(socket.SHUT_WR)
            return "connected:" + s.recv(4096).decode(errors="replace")
    except OSError as e:
        return f"refused: {e}"


def give_port(go: Path, port: int) -> None:
    """Hand LATE_CLIENT its port: written beside ``go`` and renamed onto it, so the client, which
    waits for the name to exist, never reads a file still being written."""
    tmp = go.with_name(go.name + ".tmp")
    tmp.write_text(str(port))
    tmp.rename(go)


def modes(sbx: Runner) -> list[tuple[str, Runner]]:
    out = [("own namespace", sbx)]
    if sbx.name == "sandlock":
        out.append(("host network", sbx.with_config(**HOST_MODE)))
    return out


def test_a_host_service_started_after_the_run_began_is_unreachable(sbx, world):
    for mode, rb in modes(sbx):
        go = world.project / "go"
        go.unlink(missing_ok=True)
        s = rb.start(LATE_CLIENT, timeout=30, bg_after=0.1)
        wait_text(rb, s, ("READY",))
        with listening_tcp() as (port, seen):
            give_port(go, port)
            r = rb.wait(s)
        assert CONTROL in r.output, (mode, r.output)
        assert "CONNECTED" not in r.output and "refused" in r.output, (mode, r.output)
        assert seen == [], mode


def test_an_allowed_port_is_reachable_in_the_host_network_mode(sbx, world):
    """The positive control of the host network mode: a port listed in allow_local_ports is
    reached even when its service started after the run began."""
    if sbx.name != "sandlock":
        pytest.skip("bubblewrap runs never share the host's loopback for allow_local_ports")
    with listening_tcp() as (port, seen):
        rb = sbx.with_config(sandbox={"network": {"allow_local_ports": [port]}})
        go = world.project / "go"
        s = rb.start(LATE_CLIENT, timeout=30, bg_after=0.1)
        wait_text(rb, s, ("READY",))
        give_port(go, port)
        r = rb.wait(s)
    assert "CONNECTED" in r.output, r.output
    assert b"hello" in seen


def wait_text(rb: Runner, s: Any, texts: tuple[str, ...], timeout: float = 30.0) -> str:
    """The output of session ``s`` (its last lines, so what its first result already carried
    counts too) once one of ``texts`` shows up or it ends."""

    async def seen() -> str:
        while True:
            out = rb.mgr.output(s.id, tail=200).output
            if any(t in out for t in texts) or not s.running:
                return out
            await asyncio.sleep(0.02)

    return rb.loop.run_until_complete(asyncio.wait_for(seen(), timeout))


def serve_and_probe(rb: Runner, port: int, control: bool = True) -> tuple[str, str]:
    """Start SERVER on ``port`` in a background session, let a host client send "password" to
    ``port`` and (``control``) a later run send "CONTROL"; return (what the server printed, what
    the host client got)."""
    s = rb.start(SERVER.format(port=port), timeout=60, bg_after=0.1)
    try:
        out = wait_text(rb, s, ("LISTENING", "BIND-FAILED"))
        got = in_loop(rb, lambda: host_client(port))
        if control and "LISTENING" in out:
            rb.run(CLIENT.format(port=port, text="CONTROL"))
            with contextlib.suppress(asyncio.TimeoutError):
                out = wait_text(rb, s, ("GOT b'CONTROL'",), timeout=5)
    finally:
        rb.kill(s)
    return out, got


def test_a_sandboxed_listener_never_gets_a_host_clients_connection(sbx):
    """A sandboxed server on the port of a running host service: the host's client reaches the
    host service. On a well-known service port with no host service: the host's client reaches
    nothing. The control: a later run reaches a sandboxed server."""
    well_known = next(p for p in sorted(WELL_KNOWN_SERVICE_PORTS) if is_free(p))
    for mode, rb in modes(sbx):
        with listening_tcp() as (busy, host_seen):
            # Sharing the host's network, a later run's client reaches the host's service, not
            # the sandboxed server: no control to wait for there.
            out, got = serve_and_probe(rb, busy, control=mode == "own namespace")
            assert "password" not in out, (mode, out)
            assert got.startswith("connected") and host_seen[-1] == b"password", (mode, got)
            if mode == "own namespace":  # it listens on that port, in its own namespace
                assert "GOT b'CONTROL'" in out, (mode, out)
        out, got = serve_and_probe(rb, well_known)
        assert "password" not in out and got.startswith("refused"), (mode, got, out)
        if mode == "own namespace":
            assert "GOT b'CONTROL'" in out, (mode, out)
        else:  # sharing the host's network, a well-known service port cannot be bound
            assert "BIND-FAILED 13" in out, (mode, out)
            out, _got = serve_and_probe(rb, free_port())
            assert "GOT b'CONTROL'" in out, (mode, out)  # the control: an ordinary port works


def is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_background_server_is_reachable_from_later_runs_of_both_backends(world):
    """Runs of sandlock and bubblewrap share run_bash's own namespace: a server one starts is
    reachable from the other's runs (and its own: the control)."""
    runners = []
    try:
        for name in ("sandlock", "bubblewrap"):
            runners.append(Runner(name, world))
    except pytest.skip.Exception:
        for r in runners:
            r.close()
        raise
    try:
        for server_rb in runners:
            port = free_port()
            s = server_rb.start(
                f"python3 -u -m http.server {port} --bind 127.0.0.1", timeout=60, bg_after=0.1
            )
            try:
                wait_text(server_rb, s, ("Serving HTTP",))
                for client_rb in runners:
                    r = client_rb.run(
                        f"curl -s -m 5 -o /dev/null -w 'code=%{{http_code}}\\n' 127.0.0.1:{port}/"
                    )
                    assert "code=200" in r.output, (server_rb.name, client_rb.name, r.output)
            finally:
                server_rb.kill(s)
    finally:
        for r in runners:
            r.close()


def until(rb: Runner, cond: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Run ``rb``'s loop until ``cond()`` (called in a thread) is truthy; return it."""

    async def poll() -> Any:
        while not (value := await rb.loop.run_in_executor(None, cond)):
            await asyncio.sleep(0.1)
        return value

    return rb.loop.run_until_complete(asyncio.wait_for(poll(), timeout))


def info_of(rb: Runner, sid: str) -> Any:
    return next(i for i in rb.mgr.list() if i.id == sid)


def forwarded_port(rb: Runner, sid: str, port: int) -> int:
    """The host port session ``sid``'s server on ``port`` is forwarded to, once it is."""
    fwd = until(rb, lambda: [f for f in info_of(rb, sid).forwarded if f.port == port])
    return int(fwd[0].host_port)


def test_a_forward_takes_a_port_the_kernel_picks_never_the_servers_own(sbx):
    """#20 class 6: a sandboxed server on port P is reachable from the host on a port the kernel
    picked (named in the notice, the session's `forwarded`); P itself stays free on the host, so
    a host service started later gets it, and its clients reach that service, never the
    sandbox. The forward goes with the session."""
    port = free_port()
    s = sbx.start(SERVER.format(port=port), timeout=60, bg_after=0.1)
    try:
        wait_text(sbx, s, ("LISTENING",))
        host_port = forwarded_port(sbx, s.id, port)
        assert host_port != port
        info = info_of(sbx, s.id)
        assert info.ports == (port,), info
        said = f"port {port} is forwarded to the host: 127.0.0.1:{host_port}"
        assert said in info.notices, info.notices
        # The control: the host reaches the sandboxed server through the forward.
        assert in_loop(sbx, lambda: host_client(host_port, b"through")).startswith("connected")
        wait_text(sbx, s, ("GOT b'through'",))
        # A host service started now gets port P, and its client's secret stays on the host.
        with listening_tcp(port) as (_p, host_seen):
            got = in_loop(sbx, lambda: host_client(port, b"password"))
            assert got.startswith("connected"), got
            until(sbx, lambda: b"password" in host_seen)
        out = sbx.mgr.output(s.id, tail=200).output
        assert "password" not in out, out
        assert port not in {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", said)}
    finally:
        sbx.kill(s)
    # The forward goes with the session.
    until(sbx, lambda: host_client(host_port).startswith("refused"), timeout=5)
    assert info_of(sbx, s.id).forwarded == ()


def test_a_well_known_service_port_is_forwarded_to_an_ephemeral_one(sbx):
    """A sandboxed server on the port of a database is forwarded too, on a port the kernel
    picked: the database port on the host stays free (a client there is refused, not captured)."""
    well_known = next(p for p in sorted(WELL_KNOWN_SERVICE_PORTS) if is_free(p))
    s = sbx.start(SERVER.format(port=well_known), timeout=60, bg_after=0.1)
    try:
        wait_text(sbx, s, ("LISTENING",))
        host_port = forwarded_port(sbx, s.id, well_known)
        assert host_port != well_known and is_free(well_known)
        assert in_loop(sbx, lambda: host_client(well_known)).startswith("refused")
        assert in_loop(sbx, lambda: host_client(host_port, b"via")).startswith("connected")
        wait_text(sbx, s, ("GOT b'via'",))
    finally:
        sbx.kill(s)


MANY = """python3 -u - <<'EOF'
import select, socket
socks = []
for _ in range({n}):
    l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1); socks.append(l)
print('LISTENING ' + ' '.join(str(l.getsockname()[1]) for l in socks) + ' ALL', flush=True)
while True:
    for l in select.select(socks, [], [])[0]:
        c, _ = l.accept(); c.sendall(b'HI'); c.close()
EOF"""


def test_forwards_are_limited_per_session(sbx):
    """A session listening on more ports than MAX_FORWARDED_PER_SESSION gets that many
    forwarded; the rest are named as not forwarded, with the reason."""
    n = MAX_FORWARDED_PER_SESSION + 2
    s = sbx.start(MANY.format(n=n), timeout=60, bg_after=0.1)
    try:
        # The whole line, not just its start: `python3 -u` writes print's pieces one by one.
        out = wait_text(sbx, s, (" ALL",))
        ports = [int(p) for p in out.split("LISTENING", 1)[1].split()[:n]]
        assert len(ports) == n, out

        def all_said() -> Any:
            info = info_of(sbx, s.id)
            return info if sum("forwarded" in x for x in info.notices) >= n else None

        info = until(sbx, all_said)
        assert len(info.ports) == n, info
        assert len(info.forwarded) == MAX_FORWARDED_PER_SESSION, info
        assert {f.port for f in info.forwarded} < set(ports)
        refused = [x for x in info.notices if "is not forwarded" in x]
        assert len(refused) == 2, info.notices
        assert all(f"{MAX_FORWARDED_PER_SESSION} ports of this session" in x for x in refused)
        # The forwarded ones work (the control).
        first = info.forwarded[0].host_port
        assert in_loop(sbx, lambda: host_client(first)) == "connected:HI"
    finally:
        sbx.kill(s)


def test_forwarding_can_be_turned_off(sbx):
    rb = sbx.with_config(sandbox={"network": {"forward_ports": False}})
    port = free_port()
    s = rb.start(f"python3 -u -m http.server {port} --bind 127.0.0.1", timeout=60, bg_after=0.1)
    try:
        wait_text(rb, s, ("Serving HTTP",))
        info = until(rb, lambda: next(i for i in rb.mgr.list() if i.id == s.id and i.ports))
        assert info.ports == (port,), info  # the control: it listens
        rb.loop.run_until_complete(asyncio.sleep(1.5))  # longer than a forwarding poll
        assert in_loop(rb, lambda: host_client(port)).startswith("refused")
        info = rb.mgr.output(s.id)
        assert not any("forwarded" in n for n in info.notices) and info.forwarded == ()
    finally:
        rb.kill(s)
