"""Fixtures for the security suite: a fake HOME full of secrets, a git project, and a runner that
drives one backend through the product's own spawn path (a ``SessionManager``).

Backends: ``RUN_BASH_TEST_BACKENDS`` (comma-separated; default: every confining backend); an
unavailable one is skipped with its reason. When security tests were selected and not one of them
ran under a confining backend, the session fails: a silent all-skip would prove nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from run_bash.config import Config, parse_config
from run_bash.results import RunResult
from run_bash.sandbox.base import CONFINING_BACKENDS, get_backend
from run_bash.sessions import Session, SessionManager

SECRET = "S3CR3T-do-not-leak-8c1f"
# Printed by the positive control of a test: the same command without the forbidden part.
CONTROL = "CONTROL-OK"


def selected_backends(default: tuple[str, ...] = CONFINING_BACKENDS) -> list[str]:
    raw = os.environ.get("RUN_BASH_TEST_BACKENDS")
    names = [n.strip() for n in raw.split(",") if n.strip()] if raw else list(default)
    return [n for n in names if n in default]


_AVAIL: dict[str, Any] = {}
# The test running now (set in pytest_runtest_setup), so a backend that runs can be said in its
# report: under pytest-xdist the reports are what reaches the controller, which decides.
_CURRENT: list[pytest.Item] = []
# Over the session, from the reports: did a security test use a sandbox, and which confining
# backends ran at least one.
SANDBOX_TESTS: list[str] = []
RAN: set[str] = set()
UNAVAILABLE: dict[str, str] = {}


def backend_or_skip(name: str, config: Config, counts: bool = True) -> None:
    if name not in _AVAIL:
        _AVAIL[name] = get_backend(name, config).availability()
    avail = _AVAIL[name]
    item = _CURRENT[-1] if _CURRENT else None
    if not avail.ok:
        if item is not None:
            item.user_properties.append(("run_bash_unavailable", f"{name}: {avail.reason}"))
        pytest.skip(f"{name} unavailable: {avail.reason}")
    if counts and item is not None:
        item.user_properties.append(("run_bash_confined", name))


def pytest_runtest_setup(item: pytest.Item) -> None:
    _CURRENT[:] = [item]
    if "sbx" in getattr(item, "fixturenames", ()) and "tests/security" in item.nodeid:
        item.user_properties.append(("run_bash_sandbox_test", item.nodeid))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == "run_bash_sandbox_test":
            SANDBOX_TESTS.append(str(value))
        elif key == "run_bash_confined" and report.passed and report.when == "call":
            RAN.add(str(value))
        elif key == "run_bash_unavailable":
            name, _, why = str(value).partition(": ")
            UNAVAILABLE[name] = why


def user_namespaces_work() -> bool:
    """Whether this user can create a user namespace at all, asked of the kernel without run_bash
    (util-linux's ``unshare``): both confining backends need one."""
    try:
        done = subprocess.run(["unshare", "--user", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when security tests ran but no confining backend ran one of them (decided
    where the reports meet: the only process, or pytest-xdist's controller). The one exception,
    said as loudly: a machine where this user cannot create user namespaces (asked of the kernel,
    not of run_bash), where no backend can confine and every command asks."""
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the controller sees every report
    if SANDBOX_TESTS and not RAN and exitstatus == pytest.ExitCode.OK:
        reasons = "; ".join(f"{n}: {why}" for n, why in UNAVAILABLE.items()) or "none selected"
        fail = not UNAVAILABLE or user_namespaces_work()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            why = "" if fail else "; user namespaces are not available here, so none can"
            reporter.write_line(
                f"run_bash: no confining backend ran the security suite ({reasons}){why}", red=True
            )
        if fail:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@dataclass
class World:
    """The fake user: HOME with secrets, a git project inside it, its environment."""

    home: Path
    project: Path
    env: dict[str, str]

    def path(self, rel: str) -> Path:
        return self.home / rel


def make_world(root: Path) -> World:
    home = root / "home"
    secrets = {
        ".ssh/id_rsa": SECRET + "-ssh",
        ".aws/credentials": SECRET + "-aws",
        ".netrc": SECRET + "-netrc",
        ".git-credentials": SECRET + "-gitcred",
        ".config/gh/hosts.yml": SECRET + "-gh",
        ".gnupg/private-keys-v1.d/k.key": SECRET + "-gpg",
        ".kube/config": SECRET + "-kube",
        ".docker/config.json": SECRET + "-docker",
        ".local/share/keyrings/login.keyring": SECRET + "-keyring",
        ".config/nvim/init.lua": "-- user config\n",
        ".local/share/nvim/site/x.lua": "-- data\n",
        ".cache/nvim/luac/x": "cache\n",
        ".gitconfig": "[user]\n\tname = T\n\temail = t@example.invalid\n",
        ".cache/pip/keep": "",
        ".npm/_cacache/keep": "",
    }
    for rel, text in secrets.items():
        p = home / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (home / ".ssh").chmod(0o700)
    project = home / "proj"
    project.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("XDG_") and k not in ("HOME", "GIT_DIR", "GIT_WORK_TREE")
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        OPENAI_API_KEY=SECRET + "-env",
        GITHUB_TOKEN=SECRET + "-env2",
        NVIM="/tmp/fake-nvim.sock",
        SSH_AUTH_SOCK="/tmp/fake-agent.sock",
        DBUS_SESSION_BUS_ADDRESS="unix:path=/tmp/fake-bus",
        RB_VISIBLE="visible-value",
    )
    git = {**env, "GIT_CONFIG_NOSYSTEM": "1"}
    run = lambda *a: subprocess.run(a, cwd=project, env=git, check=True, capture_output=True)  # noqa: E731
    run("git", "init", "-q", "-b", "main")
    (project / "README").write_text("hello\n")
    run("git", "add", "README")
    run("git", "commit", "-qm", "init")
    hook = project / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    return World(home, project, env)


def on_host(world: World, argv: list[str], timeout: float = 60) -> str:
    """What ``argv`` prints (stdout, then stderr) run in the project as the user runs it: their
    environment, no input. The consumer a test asks after a run."""
    done = subprocess.run(
        argv,
        cwd=world.project,
        env=world.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.stdout + done.stderr


class Runner:
    """Runs commands under one backend the way the host does: ``SessionManager.start`` and its
    result. Each runner has its own event loop, run while a test waits for a result."""

    def __init__(
        self,
        name: str,
        world: World,
        config: dict[str, Any] | None = None,
        undo_root: str | None = None,
    ) -> None:
        self.name = name
        self.world = world
        self.raw_config = config or {}
        raw = dict(self.raw_config)
        raw["sandbox"] = {**raw.get("sandbox", {}), "backend": name}
        self.config = parse_config(raw)
        backend_or_skip(name, self.config, counts=name in CONFINING_BACKENDS)
        self.loop = asyncio.new_event_loop()
        root = world.home.parent
        state = root / f"state-{len(list(root.glob('state-*')))}"
        state.mkdir(mode=0o700)
        self.recorder = None
        if undo_root is not None:  # record change sets, as the host does, into this store
            from run_bash.run_changes import RunChanges

            self.recorder = RunChanges(
                undo_root, self.config.undo, loop=self.loop, home=world.env["HOME"]
            )
        self.mgr = SessionManager(
            self.config,
            loop=self.loop,
            state_dir=str(state),
            environ=world.env,
            changes=self.recorder,
        )
        self.derived: list[Runner] = []

    def with_config(self, **raw: Any) -> Runner:
        runner = Runner(self.name, self.world, raw)
        self.derived.append(runner)
        return runner

    def with_cache(self) -> Runner:
        """The same backend with a shared cache outside the project granted writable
        (``fs_writable``), as a user may grant one: a place a run can write besides the project.
        No cache is writable by default (``policy.VERIFIED_CACHES``)."""
        return self.with_config(sandbox={"rules": {"fs_writable": [".", "~/.npm/_cacache"]}})

    def unconfined(self) -> Runner:
        """The same world through the ``none`` backend: a positive control showing that a
        command the sandbox stops does work without it."""
        runner = Runner("none", self.world)
        self.derived.append(runner)
        return runner

    def start(
        self, cmd: str, cwd: Path | None = None, timeout: float = 30.0, bg_after: float = 0
    ) -> Session:
        confined = self.name != "none"
        s = self.mgr.start(
            cmd,
            cwd=str(cwd or self.world.project),
            timeout=timeout,
            bg_after=bg_after,
            unsandboxed_ok=not confined,
        )
        assert s.backend.name == self.name and s.backend.isolates is confined
        return s

    def wait(self, s: Session, timeout: float = 60.0) -> RunResult:
        """The result once the session has ended (a background one too)."""

        async def ended() -> RunResult:
            await s.done.wait()
            return await self.mgr.wait_result(s.id) if s.result is None else s.result

        result = self.loop.run_until_complete(asyncio.wait_for(ended(), timeout))
        return self.mgr._result(s) if s.background else result

    def first_result(self, s: Session, timeout: float = 60.0) -> RunResult:
        """The first result: after ``bg_after`` for a background session."""
        coro = asyncio.wait_for(self.mgr.wait_result(s.id), timeout)
        return self.loop.run_until_complete(coro)

    def wait_output(self, s: Session, text: str, timeout: float = 15.0) -> str:
        """Run the loop until the session has printed ``text``; return its last lines. (They
        are read as a tail: output a background session's first result carried counts as read
        for ``output``, and may hold ``text`` already.)"""

        async def seen() -> str:
            while True:
                out = self.mgr.output(s.id, tail=500).output
                if text in out:
                    return out
                await asyncio.sleep(0.02)

        return self.loop.run_until_complete(asyncio.wait_for(seen(), timeout))

    def kill(self, s: Session) -> RunResult:
        return self.loop.run_until_complete(asyncio.wait_for(self.mgr.kill(s.id), 30))

    def in_background(
        self, first: str, said: str, second: str, before: str = ""
    ) -> tuple[RunResult, str]:
        """A session that goes on in the background (``bg_after``) and does two steps there:
        after ``before``, it says ``up`` and gives its first result; it does ``first`` once the
        test makes ``go`` in the project and says ``said``; then ``second`` once the test makes
        ``go2`` (after ``said`` was seen); then it sleeps 20 s and says ``survived``. Its result
        once it ended, and the end of its output (``survived`` in it: it was not stopped)."""
        s = self.start(
            f"{before}echo up; {until('go')}; {first} && echo {said}; {until('go2')}\n"
            f"{second}\nsleep 20; echo survived",
            bg_after=0.2,
            timeout=120,
        )
        given = self.first_result(s)
        assert "up" in given.output and not given.notices, given
        (self.world.project / "go").touch()
        self.wait_output(s, said)
        (self.world.project / "go2").touch()
        r = self.wait(s, timeout=120)
        return r, self.mgr.output(s.id, tail=50).output

    def run(self, cmd: str, cwd: Path | None = None, timeout: float = 30.0) -> RunResult:
        return self.wait(self.start(cmd, cwd, timeout=timeout), timeout + 30)

    def close(self) -> None:
        for runner in self.derived:
            runner.close()
        self.loop.run_until_complete(self.mgr.shutdown())
        if self.recorder is not None:
            self.recorder.close()
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


def until(name: str) -> str:
    """Shell that waits for the test to create ``name`` in the project."""
    return f"while [ ! -e {name} ]; do sleep 0.05; done"


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.fixture(params=selected_backends())
def sbx(request: pytest.FixtureRequest, world: World) -> Iterator[Runner]:
    runner = Runner(request.param, world)
    try:
        yield runner
    finally:
        runner.close()


@contextlib.contextmanager
def listening_tcp(port: int = 0) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback TCP listener on the host that records every connection it accepts."""
    import socket
    import threading

    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    seen: list[bytes] = []
    stop = threading.Event()

    def loop() -> None:
        s.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = s.accept()
            except OSError:
                continue
            seen.append(b"connect")
            with contextlib.suppress(OSError):
                c.settimeout(0.2)
                seen.append(c.recv(100))
            c.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield s.getsockname()[1], seen
    finally:
        stop.set()
        t.join(2)
        s.close()


@contextlib.contextmanager
def listening_unix(path: str) -> Iterator[list[bytes]]:
    """A Unix-socket server (like Neovim's RPC socket) that records connections."""
    import socket
    import threading

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(8)
    seen: list[bytes] = []
    stop = threading.Event()

    def loop() -> None:
        s.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = s.accept()
            except OSError:
                continue
            seen.append(b"connect")
            c.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        stop.set()
        t.join(2)
        s.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


# -- the host's service, for undo --------------------------------------------------------------------


def tree(root: Path) -> dict[str, tuple[str, ...]]:
    """Every name under ``root``: a link's text, a file's mode and content hash, a dir's mode."""
    out: dict[str, tuple[str, ...]] = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                v: tuple[str, ...] = ("l", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                v = ("f", oct(st.st_mode), hashlib.sha1(Path(p).read_bytes()).hexdigest())
            else:
                v = ("d", oct(st.st_mode))
            out[os.path.relpath(p, root)] = v
    return out


class Host:
    """The host's service in one world, on one backend, recording change sets."""

    def __init__(self, root: Path, backend: str, config: dict | None = None) -> None:
        from run_bash.service import Service

        backend_or_skip(backend, parse_config({"sandbox": {"backend": backend}}))
        self.world = make_world(root)
        self.p = self.world.project
        self.events: list[tuple[str, dict]] = []
        self.loop = asyncio.new_event_loop()
        state = root / "state"
        state.mkdir(mode=0o700)
        env = {**self.world.env, "RUN_BASH_UNDO": str(root / "undo")}
        self.svc = Service(
            self.loop, lambda n, p: self.events.append((n, p)), environ=env, state_dir=str(state)
        )
        sandbox = {**(config or {}).get("sandbox", {}), "backend": backend}
        self.svc.setup({**(config or {}), "sandbox": sandbox})

    def drive(self, cond) -> None:
        async def wait() -> None:
            while not cond():
                await asyncio.sleep(0.02)

        self.loop.run_until_complete(asyncio.wait_for(wait(), 120))

    def event(self, name: str, key: str, value: str) -> dict | None:
        for n, p in self.events:
            if n == name and p.get(key) == value and p.get("status") != "running":
                return p
        return None

    def check(self, cmd: str) -> dict:
        return self.svc.check(cmd, {"cwd": str(self.p)})

    def run(self, cmd: str) -> dict:
        started = self.svc.run({"cmd": cmd, "cwd": str(self.p)})
        if started.get("status") == "awaiting_approval":
            return started  # held for the user
        sid = started["id"]
        self.drive(lambda: self.event("result", "id", sid) is not None)
        return self.event("result", "id", sid) or {}

    def undo(self, rid: str) -> dict:
        token = f"undo-{rid}"
        self.svc.undo(rid, {"cwd": str(self.p)}, token)
        self.drive(lambda: self.event("reply", "token", token) is not None)
        return (self.event("reply", "token", token) or {})["result"]

    def close(self) -> None:
        self.svc.shutdown()
        self.loop.run_until_complete(asyncio.sleep(0.2))
        self.loop.close()


@pytest.fixture(params=selected_backends())
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    """A ``Host`` on each confining backend. A test module configures it with ``HOST_CONFIG``:
    the options, or a function of ``tmp_path`` that returns them."""
    config = getattr(request.module, "HOST_CONFIG", None)
    h = Host(tmp_path, request.param, config(tmp_path) if callable(config) else config)
    try:
        yield h
    finally:
        h.close()
