"""Host lifecycle in a real headless Neovim: lazy start, restart after a crash, clear errors, clean exit."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import psutil
import pytest

from run_bash.sandbox.base import BACKEND_NAMES
from tests.conftest import NVIM, ROOT, alive, descendants, wait_for

pytestmark = pytest.mark.nvim


def test_host_starts_lazily_on_first_use(editor):
    assert editor.lua("return require('run_bash').is_running()") is False
    # Defining the commands at startup must not start Python.
    assert editor.nvim.funcs.exists(":RunBash") == 2
    assert editor.lua("return require('run_bash')._job()") is None
    assert editor.lua("return require('run_bash').request('sessions')") == []
    assert editor.lua("return require('run_bash').is_running()") is True


def test_host_restarts_after_jobstop_with_a_message(editor):
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    first = editor.lua("require('run_bash').request('sessions'); return require('run_bash')._job()")
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    editor.nvim.funcs.jobstop(first)
    wait_for(lambda: editor.lua("return require('run_bash')._job()") is None)
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert any("Python host exited" in m[0] and m[1] == 4 for m in msgs), msgs
    r = editor.run_sync({"cmd": "echo back", "unsandboxed_ok": True})
    assert r["output"] == "back\n"
    second = editor.lua("return require('run_bash')._job()")
    assert second and second != first


def test_a_call_right_after_the_host_died_starts_a_new_one(editor):
    """Between the host's death and its keeper's exit the channel is already gone ("Invalid
    channel"): the next call must not fail on it."""
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    first = editor.lua("require('run_bash').request('sessions'); return require('run_bash')._job()")
    keeper = psutil.Process(editor.nvim.funcs.jobpid(first))
    host = keeper.children()[0]
    host.kill()
    host.wait(5)
    got = editor.lua(
        "local v, e = require('run_bash').request('sessions'); "
        "return { v = v, e = e, job = require('run_bash')._job() }"
    )
    assert got.get("e") is None and got["v"] == [] and got["job"] != first, got
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert sum("Python host exited" in m[0] for m in msgs) == 1, msgs
    wait_for(lambda: not keeper.is_running())
    assert sum("Python host exited" in m[0] for m in editor.lua("return _G.__msgs")) == 1


def backend_available(name):
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    return get_backend(name, parse_config({})).availability().ok


@pytest.mark.parametrize("backend", BACKEND_NAMES)
def test_a_crashed_host_fails_pending_runs_and_strands_nothing(editor, backend):
    if backend != "none" and not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    editor.lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
    # Unique intervals tell the run's sleeps from any other (bubblewrap's network-namespace
    # holder runs a `sleep` of its own).
    tag = f"{os.getpid() % 10000}{id(editor) % 1000:03d}"
    editor.lua(
        """
        _G.__r = nil
        local info, err = require('run_bash').run(
          { cmd = ..., unsandboxed_ok = true },
          function(r) _G.__r = r end)
        assert(info, err)
        """,
        f"setsid sleep 30.{tag} & sleep 31.{tag}",
    )
    job_pid = editor.nvim.funcs.jobpid(editor.lua("return require('run_bash')._job()"))
    keeper = psutil.Process(job_pid)
    host = wait_for(keeper.children)[0]  # the run may be queued while the host starts

    def running(interval: str) -> list[int]:
        found = []
        for pid in descendants(host.pid, "sleep"):
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).cmdline()[1:] == [interval]:
                    found.append(pid)
        return found

    wait_for(lambda: running(f"31.{tag}"))
    if backend != "sandlock":  # sandlock refuses `setsid`: there the first sleep never runs
        wait_for(lambda: running(f"30.{tag}"))
    sleepers = descendants(host.pid)
    host.kill()  # a crash of the host, e.g. SIGKILL by the OOM killer
    r = wait_for(lambda: editor.lua("return _G.__r"))
    assert "host exited" in r["error"]
    # The keeper swept what the host left behind, sandboxed or not.
    wait_for(lambda: not alive([*sleepers, keeper.pid]), timeout=8)


def test_broken_python_gives_one_clear_error(editor):
    editor.nvim.vars["run_bash_python"] = "/nonexistent/python3"
    value, err = editor.lua("local v, e = require('run_bash').request('sessions'); return {v, e}")
    assert value is None
    assert "Python not found: /nonexistent/python3" in err
    assert "make deps" in err


def test_python_without_the_hosts_modules_reports_import_error(editor, tmp_path):
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nexec /usr/bin/env -i PATH=/usr/bin:/bin python3 -I -S "$@"\n')
    fake.chmod(0o755)
    editor.nvim.vars["run_bash_python"] = str(fake)
    err = editor.lua("local _, e = require('run_bash').request('sessions'); return e")
    assert "did not start" in err
    assert "cannot load the host: No module named 'msgpack'" in err
    assert "make deps" in err


@pytest.mark.parametrize("backend", ["none", "sandlock"])
def test_qa_leaves_no_process_behind(tmp_path, backend):
    if NVIM is None:
        pytest.skip("no Neovim")
    if backend != "none" and not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    import pynvim

    nvim = pynvim.attach(
        "child",
        argv=[
            NVIM,
            "--clean",
            "--embed",
            "--headless",
            "-n",
            "--cmd",
            f"set rtp^={ROOT}",
            "-c",
            "runtime plugin/run_bash.lua",
        ],
    )
    nvim.exec_lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
    for cmd in ("sleep 300", "setsid sleep 301 & sleep 302", "(sleep 303 &); sleep 304"):
        nvim.exec_lua(
            "require('run_bash').run({ cmd = ..., bg_after = 1, unsandboxed_ok = true })", cmd
        )
    pid = nvim.funcs.getpid()
    # (sandlock refuses `setsid`: one sleep fewer.)
    wait_for(lambda: len(descendants(pid, "sleep")) >= (5 if backend == "none" else 4))
    pids = [pid, *descendants(pid)]
    with contextlib.suppress(Exception):
        nvim.command("qa!")
    with contextlib.suppress(Exception):
        nvim.close()
    wait_for(lambda: not alive(pids), timeout=8)


def host_dirs(nvim_pid: int) -> list[str]:
    """The output and temp directories of the run_bash host of ``nvim_pid`` (named after the
    keeper's pid: the job Neovim started)."""
    import glob

    import psutil

    from run_bash.statedir import temp_root_candidates

    found: list[str] = []
    for child in psutil.Process(nvim_pid).children():
        roots = {os.environ.get("XDG_RUNTIME_DIR") or "/tmp", "/tmp", *temp_root_candidates()}
        for root in roots:
            found += glob.glob(os.path.join(root, f"run_bash-{child.pid}-*"))
    return sorted(set(found))


@pytest.mark.parametrize("backend", ["none", "sandlock"])
def test_kill_9_of_neovim_leaves_no_process_behind(tmp_path, backend):
    if NVIM is None:
        pytest.skip("no Neovim")
    if backend != "none" and not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    script = tmp_path / "init.lua"
    script.write_text(
        f"vim.opt.rtp:prepend('{ROOT}')\n"
        "vim.cmd('runtime plugin/run_bash.lua')\n"
        f"require('run_bash').setup({{ sandbox = {{ backend = '{backend}' }} }})\n"
        "require('run_bash').run({ cmd = '(sleep 305 &); sleep 306', bg_after = 1,"
        " unsandboxed_ok = true })\n"
    )
    proc = subprocess.Popen(
        [NVIM, "--clean", "--headless", "-n", "-u", str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(descendants(proc.pid, "sleep")) >= 2)
        pids = descendants(proc.pid)
        dirs = host_dirs(proc.pid)
        assert len(dirs) == 2 and all(os.path.isdir(d) for d in dirs)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        wait_for(lambda: not alive(pids), timeout=8)
        # The keeper also removed the output directory and the run temp dirs.
        wait_for(lambda: not any(os.path.exists(d) for d in dirs), timeout=8)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_setup_reports_a_backend_problem(editor, tmp_path):
    """A sandlock profile that does not exist is named at setup, not at the first run."""
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    editor.lua(
        "require('run_bash').setup({ sandbox = { backend = 'sandlock', backends = {"
        " sandlock = { profile = ... } } } })",
        str(tmp_path / "missing.toml"),
    )
    assert editor.lua("return require('run_bash').request('sessions') ~= nil")
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert any("missing.toml does not exist" in m for m, _ in msgs), msgs


def trampolines(pid: int) -> list[int]:
    """The waiting bashes of prepared sandboxes below ``pid``."""
    found = []
    for child in descendants(pid, "bash"):
        with contextlib.suppress(psutil.Error):
            if any("read -r __n" in a for a in psutil.Process(child).cmdline()):
                found.append(child)
    return found


@pytest.mark.parametrize("end", ["qa!", "host crash"])
@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_prepared_sandboxes_die_with_neovim_and_the_host(tmp_path, backend, end):
    if NVIM is None:
        pytest.skip("no Neovim")
    if not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    import pynvim

    nvim = pynvim.attach(
        "child",
        argv=[NVIM, "--clean", "--embed", "--headless", "-n", "--cmd", f"set rtp^={ROOT}",
              "-c", "runtime plugin/run_bash.lua"],
    )  # fmt: skip
    try:
        nvim.exec_lua(
            "require('run_bash').setup({ sandbox = { backend = ..., prepare = true } })", backend
        )
        nvim.exec_lua(
            "_G.__r = nil; require('run_bash').run({ cmd = 'true', cwd = ... },"
            " function(r) _G.__r = r end)",
            str(tmp_path),
        )
        wait_for(lambda: nvim.exec_lua("return _G.__r"), timeout=30)
        pid = nvim.funcs.getpid()
        # One for the host's directory (prepared at setup), one for tmp_path after its run.
        wait_for(lambda: len(trampolines(pid)) >= 1, timeout=30)
        keeper = psutil.Process(
            nvim.funcs.jobpid(nvim.exec_lua("return require('run_bash')._job()"))
        )
        host = keeper.children()[0]
        # Each waiting bash and the sandbox's own processes above it, up to the host.
        spares: set[int] = set()
        for t in trampolines(pid):
            with contextlib.suppress(psutil.Error):
                for p in [psutil.Process(t), *psutil.Process(t).parents()]:
                    if p.pid in (host.pid, keeper.pid, pid):
                        break
                    spares.add(p.pid)
        assert spares
        if end == "host crash":
            host.kill()
            wait_for(lambda: not alive(list(spares)), timeout=8)
        else:
            with contextlib.suppress(Exception):
                nvim.command("qa!")
            wait_for(lambda: not alive([*spares, keeper.pid, host.pid]), timeout=8)
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()


@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_a_host_leaves_nothing_in_the_temp_dirs(tmp_path, monkeypatch, backend):
    """What the host makes for itself (its output and run temp dirs, the empty home its git
    checks run with) is gone once Neovim has quit: nothing is left in the temp dir or the runtime
    dir. The control: while the host runs, its state dir (which holds them) exists there."""
    if NVIM is None:
        pytest.skip("no Neovim")
    if not backend_available(backend):
        pytest.skip(f"{backend} is not available here")
    import glob

    import pynvim

    tmp, runtime, project = tmp_path / "tmp", tmp_path / "runtime", tmp_path / "proj"
    for d in (tmp, runtime, project):
        d.mkdir(mode=0o700)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    nvim = pynvim.attach(
        "child",
        argv=[
            *(NVIM, "--clean", "--embed", "--headless", "-n"),
            *("--cmd", f"set rtp^={ROOT}", "-c", "runtime plugin/run_bash.lua"),
        ],
    )
    pid = nvim.funcs.getpid()
    try:
        nvim.exec_lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
        done = nvim.exec_lua(
            "local r; require('run_bash').run({ cmd = 'git status --short', cwd = ... },"
            " function(x) r = x end); vim.wait(60000, function() return r ~= nil end, 10);"
            " return r",
            str(project),
        )
        assert done["exit_code"] == 0, done
        pids = [pid, *descendants(pid)]
        made = [*glob.glob(f"{tmp}/run_bash-*"), *glob.glob(f"{runtime}/run_bash-*")]
        assert made, (os.listdir(tmp), os.listdir(runtime))  # the control
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        with contextlib.suppress(Exception):
            nvim.close()
    wait_for(lambda: not alive(pids), timeout=8)
    assert os.listdir(runtime) == [] and os.listdir(tmp) == [], (
        os.listdir(runtime),
        os.listdir(tmp),
    )


def test_update_remote_plugins_registers_nothing_and_starts_no_host(editor, tmp_path):
    """run_bash's ``rplugin/`` is on the runtimepath, so a global ``:UpdateRemotePlugins`` has
    pynvim's own plugin host load its package. The package is no remote plugin: it imports
    cleanly, exports nothing, is left out of the manifest and starts nothing of run_bash's."""
    import sys

    # The control: a package that fails to import is reported by the same scan.
    broken = tmp_path / "other" / "rplugin" / "python3" / "broken_host"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("broken on purpose")\n')
    editor.nvim.command(f"set rtp+={tmp_path / 'other'}")
    manifest = tmp_path / "rplugin.vim"
    editor.nvim.vars["python3_host_prog"] = sys.executable  # this venv has pynvim (the tests')
    # Where :UpdateRemotePlugins writes (Neovim's plugin/rplugin.vim keeps the path it chose
    # at start-up in this variable).
    editor.nvim.vars["loaded_remote_plugins"] = str(manifest)
    editor.nvim.command("UpdateRemotePlugins")
    messages = editor.nvim.exec_lua("return vim.fn.execute('messages')")
    assert "broken on purpose" in messages and "broken_host" in messages, messages
    assert "run_bash_host" not in messages, messages
    assert "run_bash_host" not in manifest.read_text()
    assert editor.lua("return require('run_bash')._job()") is None
    nvim = psutil.Process(editor.nvim.funcs.getpid())
    started = [" ".join(p.cmdline()) for p in nvim.children(recursive=True)]
    assert not [c for c in started if "boot.py" in c], started
