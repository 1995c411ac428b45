"""Shared fixtures: a real headless Neovim with run_bash on 'runtimepath', isolated XDG dirs per test,
and a check that nothing the test started outlives it."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent

# Property tests explore the same examples on every run, so `make test` (and CI) is repeatable;
# HYPOTHESIS_PROFILE=explore draws new ones (use it when working on a checker or a parser).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def nvim_path() -> str | None:
    try:
        out = subprocess.run(
            [str(ROOT / "scripts" / "nvim-path")], capture_output=True, text=True, check=True
        )
    except (subprocess.CalledProcessError, OSError):
        return None
    return out.stdout.strip() or None


NVIM = nvim_path()


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``cond`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


async def until(cond: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """``wait_for`` inside an event loop: the loop keeps running (reading pipes, reaping) while
    ``cond`` is polled."""
    import asyncio

    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")


def tagged_processes() -> list[psutil.Process]:
    """Live processes carrying a RUN_BASH_SESSION tag (started by some run_bash host)."""
    found = []
    for p in psutil.process_iter(["environ", "status"]):
        with contextlib.suppress(psutil.Error):
            env = p.info.get("environ") or {}
            if "RUN_BASH_SESSION" in env and p.info.get("status") != psutil.STATUS_ZOMBIE:
                found.append(p)
    return found


def descendants(pid: int, name: str | None = None) -> list[int]:
    """Pids below ``pid`` (optionally only those called ``name``). Processes come and go while the
    tree is walked (a subshell exits between listing and reading its name): those are skipped."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if name is None or child.name() == name:
                out.append(child.pid)
    return out


def run_nvim_script(tmp_path: Path, script: str, timeout: float, **env: str) -> list[int]:
    """Run a fresh headless Neovim with ``script`` as its init.lua, in ``tmp_path``, with
    ``RB_ROOT`` (this checkout) and ``env`` in its environment; wait up to ``timeout`` s for it
    to exit. Returns the processes below it when the wait ended (all killed before this returns,
    Neovim too); raises AssertionError when Neovim had not exited."""
    assert NVIM is not None
    init = tmp_path / "init.lua"
    init.write_text(script)
    proc = subprocess.Popen(
        [NVIM, "--clean", "--headless", "-n", "-u", str(init)],
        cwd=tmp_path,
        env={**os.environ, "RB_ROOT": str(ROOT), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids: list[int] = []
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
        pids = descendants(proc.pid)
        exited = proc.poll() is not None
    finally:
        for pid in [*pids, proc.pid]:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
    assert exited, "Neovim did not exit"
    return pids


def alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
                continue
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
    return out


class Editor:
    """A headless Neovim driven through pynvim, with helpers for run_bash."""

    def __init__(self, nvim: Any, home: Path) -> None:
        self.nvim = nvim
        self.home = home

    def lua(self, code: str, *args: Any) -> Any:
        return self.nvim.exec_lua(code, *args)

    def host_pids(self) -> list[int]:
        """The nvim process and all its descendants (keeper, host, commands)."""
        pid = self.nvim.funcs.getpid()
        return [pid, *descendants(pid)]

    def run_sync(self, spec: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
        """Start a run through the Lua API and wait for its result."""
        self.lua(
            """
            _G.__rb_result = nil
            local info, err = require('run_bash').run(..., function(r) _G.__rb_result = r end)
            if not info then _G.__rb_result = { error = err } end
            """,
            spec,
        )
        return wait_for(lambda: self.lua("return _G.__rb_result"), timeout)


def xdg_env(home: Path) -> dict[str, str]:
    """The XDG variables of an isolated user whose dirs live under ``home``."""
    for sub in ("config", "data", "state", "cache", "runtime"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    (home / "runtime").chmod(0o700)
    return {
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_RUNTIME_DIR": str(home / "runtime"),
    }


@contextlib.contextmanager
def open_editor(home: Path, work: Path, env: pytest.MonkeyPatch) -> Iterator[Editor]:
    """A headless Neovim with run_bash loaded, its XDG dirs under ``home`` (set in the
    environment through ``env``), started in ``work``. On exit it quits, and nothing it started
    may outlive it."""
    if NVIM is None:
        pytest.skip("no Neovim >= 0.11 (run `make deps`)")
    import pynvim

    for key, value in xdg_env(home).items():
        env.setenv(key, value)
    work.mkdir(exist_ok=True)
    argv = [
        NVIM,
        "--clean",
        "--embed",
        "--headless",
        "-n",
        "--cmd",
        f"set rtp^={ROOT}",
        "--cmd",
        f"cd {work}",
        "-c",
        "runtime plugin/run_bash.lua",
    ]
    nvim = pynvim.attach("child", argv=argv)
    ed = Editor(nvim, home)
    ed.work = work  # type: ignore[attr-defined]
    pids: list[int] = []
    try:
        yield ed
    finally:
        with contextlib.suppress(Exception):
            pids = ed.host_pids()
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()
        gc.collect()
        # Nothing the test started may outlive the editor.
        survivors = []
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not alive(pids), timeout=8)
        survivors = alive(pids)
        for pid in survivors:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        assert not survivors, f"processes survived the editor: {survivors}"


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Editor]:
    """A fresh headless Neovim per test with run_bash loaded and every XDG dir isolated."""
    with open_editor(tmp_path / "home", tmp_path / "work", monkeypatch) as ed:
        yield ed


@pytest.fixture(scope="module")
def module_editor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Editor]:
    """One headless Neovim for a whole test module (slow tests share it), isolated like
    ``editor``."""
    root = tmp_path_factory.mktemp("editor")
    with pytest.MonkeyPatch.context() as env, open_editor(root / "home", root / "work", env) as ed:
        yield ed


@pytest.fixture
def run_bash_config() -> Callable[..., dict[str, Any]]:
    from run_bash.config import parse_config

    def make(**over: Any) -> dict[str, Any]:
        return parse_config(over)

    return make


def have(cmd: str) -> bool:
    return shutil.which(cmd) is not None
