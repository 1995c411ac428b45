"""The backend contract, the same cases for every backend, driven through the runtime
(``SessionManager``): execution, exit codes, capture, timeouts, kill of whole trees, background.

``RUN_BASH_TEST_BACKENDS=sandlock,bubblewrap,none`` selects backends (default: all); an unavailable
backend is skipped with its reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.errors import SpawnError
from run_bash.sandbox.base import (
    BACKEND_NAMES,
    REGISTRY,
    backend_class,
    broken_backend,
    get_backend,
)
from run_bash.sessions import SessionManager
from tests.conftest import alive, wait_for


def selected() -> list[str]:
    raw = os.environ.get("RUN_BASH_TEST_BACKENDS")
    names = [n.strip() for n in raw.split(",") if n.strip()] if raw else list(BACKEND_NAMES)
    return [n for n in names if n in BACKEND_NAMES]


@pytest.fixture(params=selected())
def backend_name(request: pytest.FixtureRequest) -> str:
    name = request.param
    avail = get_backend(name, parse_config({"sandbox": {"backend": name}})).availability()
    if not avail.ok:
        pytest.skip(f"{name} unavailable: {avail.reason}")
    return name


@pytest.fixture
async def mgr(tmp_path, backend_name):
    cfg = parse_config({"sandbox": {"backend": backend_name}})
    project = tmp_path / "proj"
    project.mkdir()
    # What the guard moves out of a project goes under XDG_STATE_HOME: the test's own.
    environ = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "xdg-state")}
    m = SessionManager(
        cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "state"), environ=environ
    )
    os.makedirs(m.state_dir, mode=0o700, exist_ok=True)
    m.project = str(project)  # type: ignore[attr-defined]
    m.backend_name = backend_name  # type: ignore[attr-defined]
    yield m
    await m.shutdown()


def start(m, cmd, **kw):
    kw.setdefault("cwd", m.project)
    return m.start(cmd, unsandboxed_ok=m.backend_name == "none", **kw)


async def run(m, cmd, **kw):
    s = start(m, cmd, **kw)
    return await asyncio.wait_for(m.wait_result(s.id), 60)


async def test_runs_and_captures_stdout_and_stderr_in_order(mgr):
    r = await run(mgr, "echo out; echo err >&2; echo out2")
    assert r.status == "exited"
    assert r.exit_code == 0
    assert r.output == "out\nerr\nout2\n"
    assert r.sandboxed is (mgr.backend_name != "none")


@pytest.mark.parametrize("code", [1, 3, 42, 255])
async def test_exit_codes(mgr, code):
    r = await run(mgr, f"exit {code}")
    assert r.exit_code == code


async def test_killed_by_signal(mgr):
    r = await run(mgr, "kill -9 $$")
    assert r.exit_code in (137, -9) or r.get("signal") == 9


async def test_stdin_is_empty(mgr):
    r = await run(mgr, "cat; echo done")
    assert r.output == "done\n"


async def test_cwd_and_session_tag(mgr):
    r = await run(mgr, "pwd; echo $RUN_BASH_SESSION")
    lines = r.output.splitlines()
    assert lines[0] == mgr.project
    assert len(lines[1]) >= 4


async def test_private_tmpdir(mgr):
    r = await run(mgr, 'echo x > "$TMPDIR/f" && cat "$TMPDIR/f"')
    assert r.output == "x\n"


async def test_large_output(mgr):
    r = await run(mgr, "seq 1 100000")
    assert "100000" in r.output


async def test_timeout_kills_the_whole_tree(mgr):
    cmd = "setsid sleep 501 & (sleep 502 &) ; nohup sleep 503 >/dev/null 2>&1 & echo up; sleep 504"
    s = start(mgr, cmd, timeout=1)
    wait_for(lambda: len(s.tracker.members()) >= 2, 10)
    pids = list(s.tracker.members())
    t0 = time.monotonic()
    r = await asyncio.wait_for(mgr.wait_result(s.id), 15)
    assert time.monotonic() - t0 < 8
    assert r.status == "timed_out"
    assert r.output.startswith("up")
    wait_for(lambda: not alive(pids), 8)


async def test_timeout_kills_term_ignoring_command(mgr):
    s = start(mgr, "trap '' TERM; echo ready; while :; do sleep 0.1; done", timeout=1)
    r = await asyncio.wait_for(mgr.wait_result(s.id), 15)
    assert r.status == "timed_out"
    assert r.output.startswith("ready")


async def test_leftover_background_jobs_are_stopped(mgr):
    t0 = time.monotonic()
    r = await run(mgr, "sleep 300 & echo started")
    assert time.monotonic() - t0 < 6
    assert r.output == "started\n"


async def test_background_session_then_kill(mgr):
    s = start(mgr, "echo first; sleep 0.2; echo second; sleep 300", bg_after=1)
    r = await asyncio.wait_for(mgr.wait_result(s.id), 10)
    assert r.status == "running"
    assert r.output == "first\nsecond\n"
    pids = list(s.tracker.members())
    k = await mgr.kill(s.id)
    assert k.status == "killed"
    wait_for(lambda: not alive(pids), 8)


async def test_background_early_exit(mgr):
    r = await run(mgr, "echo quick; exit 4", bg_after=30)
    assert r.status == "exited"
    assert r.exit_code == 4


async def test_many_runs_in_a_row(mgr):
    for i in range(10):
        r = await run(mgr, f"echo {i}")
        assert r.output == f"{i}\n"


async def test_sandbox_failure_is_a_clear_error_not_an_unconfined_run(tmp_path, backend_name):
    if backend_name == "none":
        pytest.skip("nothing to build")
    cfg = parse_config({"sandbox": {"backend": backend_name}})
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "s"))
    os.makedirs(m.state_dir, mode=0o700, exist_ok=True)
    backend = m.backend(backend_name)
    orig = backend.availability
    try:
        from run_bash.sandbox.base import Availability

        backend._availability = Availability(False, "broken for the test", "fix it")
        with pytest.raises(SpawnError):
            m.start("touch SHOULD_NOT_EXIST", cwd=str(tmp_path))
        assert not (tmp_path / "SHOULD_NOT_EXIST").exists()
    finally:
        backend._availability = None
        backend.availability = orig
        await m.shutdown()


def cli(*args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "python")}
    return subprocess.run(
        [sys.executable, "-m", "run_bash", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_sandbox_passes_output_and_exit_code(tmp_path, backend_name):
    r = cli(
        "sandbox",
        "--backend",
        backend_name,
        "--",
        "echo out; echo err >&2; exit 7",
        cwd=str(tmp_path),
    )
    assert r.returncode == 7, r.stderr
    assert r.stdout == "out\n"
    assert "err" in r.stderr


def test_cli_sandbox_keeps_the_quoting_of_several_arguments(tmp_path, backend_name):
    r = cli("sandbox", "--backend", backend_name, "--", "sh", "-c", "exit 3", cwd=str(tmp_path))
    assert r.returncode == 3, r.stderr
    r = cli(
        "sandbox",
        "--backend",
        backend_name,
        "--",
        "printf",
        "%s\\n",
        "a b",
        "$HOME",
        cwd=str(tmp_path),
    )
    assert r.stdout == "a b\n$HOME\n", r.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "cannot read --config"), ("{nope", "is not valid JSON"), ("[1]", "a JSON object")],
)
def test_cli_bad_config_file_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "cfg.json"
    if content is not None:
        path.write_text(content)
    r = cli("sandbox", "--backend", "none", "--config", str(path), "--", "true", cwd=str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.startswith("run_bash: ") and message in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_policy_is_json(tmp_path, backend_name):
    r = cli("policy", "--backend", backend_name, "--cwd", str(tmp_path), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["backend"]["name"] == backend_name
    assert str(tmp_path) in data["paths"]["writable"]
    assert "PATH" in data["env"]["names"]
    assert set(data["limits"]) == {"max_processes", "max_memory", "max_file_size", "max_temp_size"}


async def test_existing_protected_file_is_read_only(mgr):
    """A write to an existing .git/config fails at once in both confining backends (a read-only
    bind); the same write to .git/description (the control) works."""
    if mgr.backend_name == "none":
        pytest.skip("the none backend protects nothing")
    subprocess.run(["git", "init", "-q", mgr.project], check=True)
    config = Path(mgr.project, ".git", "config")
    before = config.read_bytes()
    r = await run(
        mgr,
        "echo ok >> .git/description && echo CONTROL-OK; echo 'fsmonitor = evil' >> .git/config",
    )
    assert config.read_bytes() == before
    assert "CONTROL-OK" in r.output and "Read-only file system" in r.output, r.output


async def test_protected_name_created_in_a_background_session_is_removed_and_reported(mgr):
    """A protected name that did not exist (.envrc) cannot be bound read-only, so it is watched: a
    background session that creates one is stopped, the name removed, and after ``bg_after`` the
    exit event, ``output`` and ``list`` carry the notice."""
    if mgr.backend_name == "none":
        pytest.skip("the none backend protects nothing")
    events: list[tuple[str, dict]] = []
    mgr.on_event = lambda name, payload: events.append((name, payload))
    subprocess.run(["git", "init", "-q", mgr.project], check=True)
    envrc = Path(mgr.project, ".envrc")
    s = start(
        mgr,
        "echo ok > notes && sleep 1; ln -s /bin/true .envrc; sleep 3; echo survived",
        bg_after=0.3,
    )
    first = await asyncio.wait_for(mgr.wait_result(s.id), 30)
    assert first.status == "running" and first.notices == ()
    await asyncio.wait_for(s.done.wait(), 30)
    assert not os.path.lexists(envrc)
    assert Path(mgr.project, "notes").read_text() == "ok\n"  # the control: it ran until then
    assert "survived" not in mgr.output(s.id, tail=5).output
    exited = [p for n, p in events if n == "exited" and p.id == s.id]
    assert exited and any(".envrc" in n for n in exited[0].notices)
    assert any(".envrc" in n for n in mgr.output(s.id).notices)
    assert any(".envrc" in n for n in mgr.list()[0].notices)


async def test_sandlock_launcher_killed_takes_its_runs_along_and_is_restarted(mgr):
    """A SIGKILL of the fork server: every run it started ends (escaped processes included), the
    sessions report it, and the next command starts a new fork server and runs."""
    if mgr.backend_name != "sandlock":
        pytest.skip("the namespace launcher is sandlock's")
    import signal

    from run_bash.sandbox.launcher import launcher

    s = start(mgr, "(sleep 601 &) ; nohup sleep 602 >/dev/null 2>&1 & sleep 603", bg_after=0.3)
    await asyncio.wait_for(mgr.wait_result(s.id), 30)
    wait_for(lambda: len(s.tracker.members()) >= 3, 10)
    pids = list(s.tracker.members())
    server = launcher().pid
    assert server is not None and alive([server])
    os.kill(server, signal.SIGKILL)
    await asyncio.wait_for(s.done.wait(), 15)
    assert s.status == "exited" and s.signal == signal.SIGKILL
    wait_for(lambda: not alive(pids), 8)
    r = await run(mgr, "echo again")
    assert r.output == "again\n"
    assert launcher().pid not in (None, server)


def test_a_fork_server_started_from_a_thread_outlives_the_thread(tmp_path):
    """The fork server's parent-death signal comes when the thread that started it ends; it must
    tell that from the host's death and keep serving (the control: it dies with its host,
    checked by the lifetime tests)."""
    import threading

    from run_bash.sandbox.launcher import Launcher

    if not get_backend("sandlock", parse_config({})).availability().ok:
        pytest.skip("sandlock unavailable")
    fresh = Launcher()
    started: list[int] = []
    t = threading.Thread(target=lambda: started.append(fresh.ensure()))
    t.start()
    t.join()
    try:
        # The signal is sent when the kernel thread is gone, a moment after join().
        wait_for(lambda: not os.path.exists(f"/proc/self/task/{t.native_id}"), 5)
        assert alive(started), "the fork server died with the thread that started it"
        assert fresh.probe({"tmp": str(tmp_path), "mount_ns": True}) == ""
        assert fresh.ensure() == started[0]  # the same server, not a restarted one
    finally:
        fresh._stop()


def test_a_fork_server_started_anew_imports_nothing_from_the_working_directory(
    tmp_path, monkeypatch
):
    """A fork server started as a Python of its own (the first one died) runs in "/" with no
    working directory on its import path: a module a run left in the project (the host's working
    directory) is never imported there. The control: its requests are answered."""
    from run_bash.sandbox.launcher import Launcher

    if not get_backend("sandlock", parse_config({})).availability().ok:
        pytest.skip("sandlock unavailable")
    monkeypatch.chdir(tmp_path)
    fresh = Launcher()
    try:
        pid = fresh.ensure()
        assert os.readlink(f"/proc/{pid}/cwd") == "/"
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            assert b"\0-I\0" in f.read()
        assert fresh.probe({"tmp": str(tmp_path), "mount_ns": True}) == ""
    finally:
        fresh._stop()


def test_sandlock_without_user_namespaces_is_unavailable_or_explicitly_degraded(tmp_path):
    """Where a normal user may not create user namespaces (here: inside a bwrap that forbids
    them, without capabilities), sandlock refuses to run, saying why and what to do; with
    allow_degraded it runs without the namespace: /tmp is refused and a protected file is put
    back. The control: the same command works with namespaces."""
    import shutil

    if shutil.which("bwrap") is None:
        pytest.skip("needs bwrap to take user namespaces away")
    if not get_backend("sandlock", parse_config({})).availability().ok:
        pytest.skip("sandlock unavailable")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    config = tmp_path / ".git/config"
    before = config.read_bytes()
    no_userns = ["bwrap", "--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    no_userns += ["--dev-bind", "/", "/", "--proc", "/proc", "--"]
    probe = subprocess.run([*no_userns, "true"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot take user namespaces away here: {probe.stderr.strip()}")
    cmd = "echo x > /tmp/f && echo TMP-OK; echo evil >> .git/config; sleep 2; echo after"

    def sandbox(prefix, *cfg):
        root = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": str(root / "python")}
        argv = [*prefix, sys.executable, "-m", "run_bash", "sandbox", "--backend", "sandlock"]
        argv += [*cfg, "--cwd", str(tmp_path), "--", cmd]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)

    refused = sandbox(no_userns)
    assert refused.returncode == 125, refused.stderr
    assert "cannot build a run's mount namespace" in refused.stderr
    assert "user namespaces are not available" in refused.stderr
    assert 'sandbox.backend = "bubblewrap"' in refused.stderr and "Traceback" not in refused.stderr
    assert "TMP-OK" not in refused.stdout and config.read_bytes() == before
    degraded_cfg = tmp_path / "degraded.json"
    degraded_cfg.write_text('{"sandbox": {"backends": {"sandlock": {"allow_degraded": true}}}}')
    degraded = sandbox(no_userns, "--config", str(degraded_cfg))
    assert "TMP-OK" not in degraded.stdout and "/tmp/f: Permission denied" in degraded.stderr
    assert "after" not in degraded.stdout, degraded  # stopped at the change
    assert "protected file .git/config was changed inside the sandbox; restored" in degraded.stderr
    assert config.read_bytes() == before
    control = sandbox([])
    assert "TMP-OK" in control.stdout and "after" in control.stdout, control
    assert "Read-only file system" in control.stderr and config.read_bytes() == before


@pytest.mark.parametrize("entry", REGISTRY, ids=lambda e: e.name)
def test_the_registry_entry_matches_its_class(entry):
    """The one list of backends: the name is the config value, the module and the class's name;
    whether it confines is the class's own answer."""
    cls = backend_class(entry.name)
    assert cls.name == entry.name
    assert cls.__module__ == f"run_bash.sandbox.{entry.name}"
    assert cls.isolates is entry.isolates


def test_a_backend_whose_module_does_not_load_is_unavailable_not_fatal():
    broken = broken_backend("sandlock", ImportError("no module named sandlock"))(parse_config({}))
    assert broken.name == "sandlock" and broken.isolates
    avail = broken.availability()
    assert not avail.ok and "failed to load: no module named sandlock" in avail.reason
    with pytest.raises(SpawnError, match="failed to load"):
        broken.spawn(None)  # type: ignore[arg-type]


async def test_a_command_holding_invalid_utf8_runs_with_its_bytes(mgr):
    """Commands from Lua may hold bytes that are not UTF-8 (surrogate escapes in Python): every
    backend runs exactly those bytes."""
    cmd = b"printf '%s' 'caf\xe9' | od -An -tx1; echo done".decode("utf-8", "surrogateescape")
    r = await run(mgr, cmd)
    assert r.output.split() == ["63", "61", "66", "e9", "done"], r.output


async def test_plain_runs_never_report_false_leftovers(mgr):
    """A run's own init (bubblewrap's pid 1) outliving the command for a moment is not a process
    the command left behind: 100 plain runs, none reports leftovers."""
    for i in range(100):
        r = await run(mgr, f"echo {i}")
        assert (r.output, r.leftovers) == (f"{i}\n", 0), r
    # Control: what a command really leaves behind is stopped, and counted where the runtime
    # stops it (the sandboxes end it themselves: bubblewrap's kernel with the run's pid namespace).
    s = start(mgr, "sleep 300 & echo started")
    r = await asyncio.wait_for(mgr.wait_result(s.id), 30)
    assert r.output == "started\n"
    if mgr.backend_name == "none":
        assert r.leftovers == 1
    assert s.tracker.members() == []
