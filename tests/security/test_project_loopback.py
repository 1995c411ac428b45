"""One loopback namespace per project (#20 class 7), for every confining backend, through the
product's spawn path: a run in project B never reaches a server started for project A, while A's
own later runs (of either backend, and from a subdirectory of A) do. A project's namespace is let
go when nothing of it runs (kept for its next run, a bounded number of them).
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from run_bash.sandbox.netholder import LOOPBACKS, MAX_IDLE
from tests.security.conftest import CONTROL, Runner, World
from tests.security.test_loopback import forwarded_port, free_port, in_loop, wait_text

# Prints CONTROL when the port answers with HTTP 200, REFUSED otherwise.
PROBE = (
    "curl -s -m 5 -o /dev/null -w 'code=%{{http_code}}\\n' 127.0.0.1:{port}/ | "
    "grep -q code=200 && echo " + CONTROL + " || echo REFUSED"
)


def http_get(port: int, path: str) -> str:
    """The whole answer of an HTTP GET to the host's 127.0.0.1:``port``."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := c.recv(65536):
            data += chunk
    return data.decode(errors="replace")


def make_project(world: World, name: str) -> Path:
    """Another git repository in the fake home, beside the world's project."""
    path = world.home / name
    path.mkdir()
    env = {**world.env, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env=env, check=True)
    return path


def serve(rb: Runner, cwd: Path, port: int):  # -> Session
    s = rb.start(f"python3 -u -m http.server {port} --bind 127.0.0.1", cwd=cwd, bg_after=0.1)
    wait_text(rb, s, ("Serving HTTP",))
    return s


def test_a_run_of_another_project_cannot_reach_a_projects_server(sbx, world):
    project_a, project_b = world.project, make_project(world, "proj-b")
    (project_a / "sub").mkdir()
    port = free_port()
    s = serve(sbx, project_a, port)
    try:
        # The control: project A's later runs reach it, from its top and from a subdirectory.
        assert CONTROL in sbx.run(PROBE.format(port=port), cwd=project_a).output
        assert CONTROL in sbx.run(PROBE.format(port=port), cwd=project_a / "sub").output
        # Project B's run does not: its loopback is another one.
        r = sbx.run(PROBE.format(port=port), cwd=project_b)
        assert "REFUSED" in r.output and CONTROL not in r.output, r.output
        # Nor does a plain directory outside both projects.
        plain = world.home / "notes"
        plain.mkdir()
        assert "REFUSED" in sbx.run(PROBE.format(port=port), cwd=plain).output
    finally:
        sbx.kill(s)


def test_both_backends_share_a_projects_loopback_and_only_its_own(world):
    """A server of project A under one backend is reached by A's runs under the other backend,
    never by B's."""
    runners: list[Runner] = []
    try:
        for name in ("sandlock", "bubblewrap"):
            runners.append(Runner(name, world))
    except pytest.skip.Exception:
        for r in runners:
            r.close()
        raise
    project_b = make_project(world, "proj-b")
    try:
        for server_rb in runners:
            port = free_port()
            s = serve(server_rb, world.project, port)
            try:
                for client_rb in runners:
                    mine = client_rb.run(PROBE.format(port=port), cwd=world.project)
                    other = client_rb.run(PROBE.format(port=port), cwd=project_b)
                    assert CONTROL in mine.output, (server_rb.name, client_rb.name, mine.output)
                    assert "REFUSED" in other.output, (server_rb.name, client_rb.name)
            finally:
                server_rb.kill(s)
    finally:
        for r in runners:
            r.close()


def test_two_projects_may_serve_on_the_same_port_and_each_is_forwarded(sbx, world):
    """Each project has its own port space: both servers on port P start, each project's run
    reaches its own, and each is forwarded to a host port of its own."""
    project_b = make_project(world, "proj-b")
    port = free_port()
    (world.project / "who").write_text("A\n")
    (project_b / "who").write_text("B\n")
    a = serve(sbx, world.project, port)
    b = serve(sbx, project_b, port)
    get = f"curl -s -m 5 127.0.0.1:{port}/who"
    try:
        assert sbx.run(get, cwd=world.project).output.strip() == "A"
        assert sbx.run(get, cwd=project_b).output.strip() == "B"
        host_a, host_b = forwarded_port(sbx, a.id, port), forwarded_port(sbx, b.id, port)
        assert len({host_a, host_b, port}) == 3
        assert in_loop(sbx, lambda: http_get(host_a, "/who")).endswith("\r\n\r\nA\n")
        assert in_loop(sbx, lambda: http_get(host_b, "/who")).endswith("\r\n\r\nB\n")
    finally:
        sbx.kill(a)
        sbx.kill(b)


def test_a_projects_namespace_is_let_go_when_nothing_of_it_runs(sbx, world):
    """While a session of the project runs, its namespace is held; once nothing of it runs it is
    idle, and idle namespaces beyond MAX_IDLE are closed (least recently used first)."""
    port = free_port()
    s = serve(sbx, world.project, port)
    key = str(world.project.resolve())
    held = {lb.key for lb in LOOPBACKS.active()}
    assert key in held
    sbx.kill(s)
    assert key not in {lb.key for lb in LOOPBACKS.active()}
    assert key in LOOPBACKS.projects()  # kept for the project's next run
    for i in range(MAX_IDLE):
        other = make_project(world, f"idle-{i}")
        assert "ok" in sbx.run("echo ok", cwd=other).output
    assert key not in LOOPBACKS.projects()
    assert len([k for k in LOOPBACKS.projects() if k not in held]) <= MAX_IDLE
    # The project's next run gets a namespace again (the control), and the old server is gone.
    r = sbx.run(PROBE.format(port=port), cwd=world.project)
    assert "REFUSED" in r.output
    assert key in LOOPBACKS.projects()
