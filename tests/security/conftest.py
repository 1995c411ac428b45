"""Fixtures for the security suite: a fake HOME full of secrets, a git project, and a runner that
drives one backend directly (spawn → read the pipe → reap → sweep), the way the runtime does.

Backends: ``RUN_BASH_TEST_BACKENDS`` (comma-separated; default: sandlock,bubblewrap); an unavailable
one is skipped with its reason.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from run_bash.config import parse_config
from run_bash.sandbox import proc
from run_bash.sandbox.base import CONFINING_BACKENDS, RunSpec, get_backend
from run_bash.sandbox.policy import build_env, build_policy

SECRET = "S3CR3T-do-not-leak-8c1f"


def selected_backends(default: tuple[str, ...] = CONFINING_BACKENDS) -> list[str]:
    raw = os.environ.get("RUN_BASH_TEST_BACKENDS")
    names = [n.strip() for n in raw.split(",") if n.strip()] if raw else list(default)
    return [n for n in names if n in default]


_AVAIL: dict[str, Any] = {}


def backend_or_skip(name: str, config: dict[str, Any]) -> Any:
    b = get_backend(name, config)
    if name not in _AVAIL:
        _AVAIL[name] = b.availability()
    avail = _AVAIL[name]
    if not avail.ok:
        pytest.skip(f"{name} unavailable: {avail.reason}")
    return b


@dataclass
class Result:
    status: int
    output: str
    notices: list[str] = field(default_factory=list)
    pid: int = 0


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


class Runner:
    """Runs commands with one backend, as the runtime would."""

    def __init__(self, name: str, world: World, config: dict[str, Any] | None = None) -> None:
        self.name = name
        self.world = world
        self.raw_config = config or {}
        self.config = parse_config({"sandbox": {"backend": name}, **self.raw_config})
        self.backend = backend_or_skip(name, self.config)
        self.tmp_root = world.home.parent / "state"
        self.tmp_root.mkdir(exist_ok=True, mode=0o700)
        self.count = 0

    def with_config(self, **raw: Any) -> Runner:
        return Runner(self.name, self.world, raw)

    def policy(self, cwd: Path | None = None, **kw: Any) -> Any:
        return build_policy(self.config, str(cwd or self.world.project), env=self.world.env, **kw)

    def start(self, cmd: str, cwd: Path | None = None, **kw: Any) -> tuple[Any, int, Any]:
        self.count += 1
        sid = f"t{os.getpid()}x{self.count}"
        tmpdir = self.tmp_root / f"tmp-{sid}"
        tmpdir.mkdir(mode=0o700)
        env, _dropped = build_env(
            self.config, tmpdir=str(tmpdir), session_id=sid, base_env=self.world.env
        )
        r, w = os.pipe2(os.O_CLOEXEC)
        spec = RunSpec(
            cmd=cmd,
            cwd=str(cwd or self.world.project),
            env=env,
            stdout_fd=w,
            tmpdir=str(tmpdir),
            session_id=sid,
            policy=self.policy(cwd, **kw),
        )
        try:
            launched = self.backend.spawn(spec)
        finally:
            os.close(w)
        return launched, r, proc.Tracker(sid, launched.pid)

    def finish(self, launched: Any, r: int, tracker: Any, timeout: float = 30.0) -> Result:
        out = bytearray()
        pidfd = os.pidfd_open(launched.pid)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    launched.terminate(9)
                    tracker.signal(9)
                    break
                ready, _, _ = select.select([r, pidfd], [], [], min(left, 1.0))
                if r in ready:
                    chunk = os.read(r, 1 << 16)
                    if chunk:
                        out += chunk
                        continue
                    break
                if pidfd in ready:
                    break
            status = launched.reap()
            os.set_blocking(r, False)
            end = time.monotonic() + 0.3
            while time.monotonic() < end:
                try:
                    chunk = os.read(r, 1 << 16)
                except BlockingIOError:
                    time.sleep(0.02)
                    continue
                if not chunk:
                    break
                out += chunk
            proc.sweep([tracker], grace_s=0.5)
            launched.close()
            return Result(
                status, out.decode(errors="replace"), list(launched.notices), launched.pid
            )
        finally:
            os.close(pidfd)
            os.close(r)

    def run(self, cmd: str, cwd: Path | None = None, timeout: float = 30.0, **kw: Any) -> Result:
        launched, r, tracker = self.start(cmd, cwd, **kw)
        return self.finish(launched, r, tracker, timeout)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


@pytest.fixture(params=selected_backends())
def sbx(request: pytest.FixtureRequest, world: World) -> Iterator[Runner]:
    yield Runner(request.param, world)


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
