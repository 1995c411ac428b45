"""SessionManager with real processes (the "none" backend): exit codes, timeouts, trees, background."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.errors import SessionError, SpawnError, UsageError
from run_bash.sandbox.base import CONFINING_BACKENDS, get_backend
from run_bash.sessions import SessionManager
from tests.conftest import alive, until, wait_for


@pytest.fixture
async def mgr(tmp_path):
    events: list[tuple[str, dict]] = []
    cfg = parse_config({"sandbox": {"backend": "none"}})
    m = SessionManager(
        cfg,
        loop=asyncio.get_running_loop(),
        on_event=lambda n, p: events.append((n, p)),
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(m.state_dir, mode=0o700)
    m.events = events  # type: ignore[attr-defined]
    yield m
    await m.shutdown()


def start(m, cmd, **kw):
    return m.start(cmd, unsandboxed_ok=True, **kw)


async def run(m, cmd, **kw):
    s = start(m, cmd, **kw)
    return await asyncio.wait_for(m.wait_result(s.id), 30)


async def test_success_and_output(mgr):
    r = await run(mgr, "echo out; echo err >&2")
    assert r.status == "exited"
    assert r.exit_code == 0
    assert r.output == "out\nerr\n"
    assert r.sandboxed is False


@pytest.mark.parametrize("code", [1, 2, 42, 255])
async def test_exit_codes(mgr, code):
    r = await run(mgr, f"exit {code}")
    assert r.exit_code == code


async def test_signal_is_reported(mgr):
    r = await run(mgr, "kill -9 $$")
    assert r.signal == 9
    assert r.exit_code == 137


async def test_stdout_and_stderr_interleave_in_time_order(mgr):
    r = await run(mgr, "for i in 1 2 3; do echo o$i; echo e$i >&2; done")
    assert r.output == "o1\ne1\no2\ne2\no3\ne3\n"


async def test_stdin_is_dev_null(mgr):
    r = await run(mgr, "cat; echo done; readlink /proc/self/fd/0")
    assert r.output.startswith("done\n/dev/null")


async def test_anti_hang_environment(mgr):
    r = await run(mgr, "echo $GIT_TERMINAL_PROMPT $GIT_EDITOR $PAGER $GIT_PAGER $TERM")
    assert r.output == "0 true cat cat dumb\n"


async def test_timeout_kills_tree_including_setsid_and_double_fork(mgr):
    cmd = "setsid sleep 401 & (sleep 402 &) ; nohup sleep 403 >/dev/null 2>&1 & echo up; sleep 404"
    s = start(mgr, cmd, timeout=1)
    wait_for(lambda: len(s.tracker.members()) >= 4, 5)
    pids = list(s.tracker.members())
    t0 = time.monotonic()
    r = await asyncio.wait_for(mgr.wait_result(s.id), 10)
    assert time.monotonic() - t0 < 5
    assert r.status == "timed_out"
    assert r.timed_out is True
    assert r.exit_code == 124
    assert r.output == "up\n"
    wait_for(lambda: not alive(pids), 5)


async def test_timeout_kills_process_ignoring_term(mgr):
    s = start(mgr, "trap '' TERM; echo ready; while :; do sleep 0.1; done", timeout=1)
    r = await asyncio.wait_for(mgr.wait_result(s.id), 10)
    assert r.status == "timed_out"
    assert r.output.startswith("ready")


async def test_background_ampersand_returns_at_once_and_is_stopped(mgr):
    t0 = time.monotonic()
    s = start(mgr, "sleep 300 & echo started")
    r = await asyncio.wait_for(mgr.wait_result(s.id), 30)
    assert time.monotonic() - t0 < 3
    assert r.output == "started\n"
    assert r.leftovers == 1
    seen = [pid for pid in s.tracker.known if pid != s.pid]
    assert seen
    assert not alive(seen)


async def test_server_that_never_closes_stdout_does_not_hang(mgr):
    r = await run(mgr, "(exec 1>&-; sleep 300) & (while :; do sleep 1; done) > /dev/null & echo ok")
    assert r.output == "ok\n"


async def test_background_session_partial_output_then_kill(mgr):
    s = start(mgr, "echo first; sleep 0.2; echo second; sleep 300", bg_after=1)
    r = await asyncio.wait_for(mgr.wait_result(s.id), 5)
    assert r.status == "running"
    assert r.background is True
    assert r.output == "first\nsecond\n"
    assert r.output_file.endswith(f"{s.id}.log")
    k = await mgr.kill(s.id)
    assert k.status == "killed"
    again = await mgr.kill(s.id)
    assert again.already_ended is True
    assert again.status == "killed"
    assert "exited" in [n for n, _ in mgr.events]


async def test_background_early_exit_returns_early(mgr):
    t0 = time.monotonic()
    r = await run(mgr, "echo quick; exit 3", bg_after=30)
    assert time.monotonic() - t0 < 5
    assert r.status == "exited"
    assert r.exit_code == 3


async def test_output_since_last_read_and_tail(mgr):
    s = start(mgr, "echo a; sleep 0.3; echo b; echo c; sleep 300", bg_after=0.1)
    r = await mgr.wait_result(s.id)
    assert r.output == "a\n"
    await until(lambda: s.capture.total == len("a\nb\nc\n"))
    assert mgr.output(s.id).output == "b\nc\n"
    assert mgr.output(s.id).output == ""
    assert mgr.output(s.id, tail=1).output == "c\n"
    with pytest.raises(UsageError):
        mgr.output(s.id, tail=0)
    await mgr.kill(s.id)


async def test_paged_output_loses_nothing(mgr):
    """Reading a big background output page by page returns every line once, whole lines per page,
    each page within the agent's character budget."""
    s = start(
        mgr,
        "sleep 0.3; seq 1 20000; for i in $(seq 50); do printf 'é%.0s' $(seq 900); echo; done; sleep 300",
        bg_after=0.1,
    )
    await mgr.wait_result(s.id)
    expected = sum(len(str(i)) + 1 for i in range(1, 20001)) + 50 * (900 * 2 + 1)
    await until(lambda: s.capture.total == expected)
    pages = []
    while True:
        page = mgr.output(s.id)
        if not page.output:
            break
        pages.append(page)
        assert len(page.output) <= mgr.config.output.max_chars
    text = "".join(p.output for p in pages)
    lines = text.split("\n")
    assert lines[:20000] == [str(i) for i in range(1, 20001)]
    assert lines[20000:] == ["é" * 900] * 50 + [""]
    assert pages[-1].unread_bytes == 0 and len(pages) > 3
    await mgr.kill(s.id)


async def test_finished_session_keeps_its_text_not_its_buffers(mgr):
    r = await run(mgr, "seq 1 200000")
    s = mgr.sessions[r.id]
    assert len(s.capture.head) == 0 and len(s.capture.tail) == 0
    assert r.output.startswith("1\n2\n") and r.output.endswith("199999\n200000\n")
    assert (await mgr.kill(r.id)).output == r.output


async def test_kill_of_exited_session_keeps_output(mgr):
    r = await run(mgr, "echo kept; exit 5")
    k = await mgr.kill(r.id)
    assert k.already_ended is True
    assert k.exit_code == 5
    assert k.output == "kept\n"


async def test_unknown_session(mgr):
    with pytest.raises(SessionError, match="unknown session id 'nope'"):
        await mgr.kill("nope")
    with pytest.raises(SessionError):
        mgr.output("nope")


async def test_output_file_and_dir_permissions(mgr):
    r = await run(mgr, "echo secret")
    assert stat.S_IMODE(os.stat(r.output_file).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(r.output_file)).st_mode) == 0o700


async def test_private_tmpdir_is_removed_after_the_run(mgr):
    r = await run(mgr, 'echo "$TMPDIR"; touch "$TMPDIR/x"')
    tmp = r.output.strip()
    assert tmp.startswith(mgr.temp_root + "/")
    await mgr.sessions[r.id].done.wait()  # the run has let go of what it held
    assert not os.path.exists(tmp)


async def test_run_temp_dirs_are_on_disk_apart_from_the_output_files(mgr):
    from run_bash.statedir import RAM_FILESYSTEMS, fs_type

    r = await run(mgr, 'echo "$TMPDIR"')
    root = mgr.temp_root
    assert fs_type(root) not in RAM_FILESYSTEMS and fs_type(root) != ""
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
    assert not r.output.strip().startswith(mgr.state_dir)
    await mgr.shutdown()
    assert not os.path.exists(root) and not os.path.exists(mgr.state_dir)


async def test_a_runs_temp_dir_is_its_tmpdir_and_goes_with_it(tmp_path):
    """Each run has its own TMPDIR under the host's temp root, removed when the run ends (the
    size cap is the kernel's, inside a sandbox: tests/security/test_limits.py)."""
    cfg = parse_config({"sandbox": {"backend": "none"}})
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "s"))
    os.makedirs(m.state_dir)
    try:
        s = m.start('echo "$TMPDIR"; head -c 5000000 /dev/zero > "$TMPDIR/f"', unsandboxed_ok=True)
        r = await asyncio.wait_for(m.wait_result(s.id), 30)
        assert r.status == "exited" and r.output.strip() == s.tmpdir, r
        assert os.path.dirname(s.tmpdir) == m.temp_root
        await asyncio.wait_for(s.done.wait(), 30)  # the run has let go of what it held
        assert not os.path.exists(s.tmpdir)
    finally:
        await m.shutdown()


async def test_file_cap_drops_output_with_marker_and_command_continues(tmp_path):
    cfg = parse_config({"sandbox": {"backend": "none"}, "output": {"file_cap": 10000}})
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "s"))
    os.makedirs(m.state_dir)
    try:
        s = m.start("head -c 50000 /dev/zero | tr '\\0' x; echo; echo END", unsandboxed_ok=True)
        r = await m.wait_result(s.id)
        assert r.exit_code == 0
        assert r.file_capped is True
        data = Path(r.output_file).read_bytes()
        assert data.startswith(b"x" * 10000)
        assert b"reached its cap of 10000 bytes" in data
        assert r.output_bytes == 50005  # 50000 x, "\\n", "END\\n"
        assert r.output.rstrip().endswith("END")  # memory tail still sees the end
    finally:
        await m.shutdown()


async def test_agent_output_is_capped_head_and_tail(mgr):
    r = await run(mgr, "seq 1 100000")
    out = r.output
    assert len(out) <= 30000
    assert out.startswith("1\n2\n")
    assert out.rstrip().endswith("100000")
    assert "characters cut" in out and r.output_file in out
    assert r.truncated is True


async def test_non_utf8_and_control_sequences_are_cleaned(mgr):
    r = await run(
        mgr, r"printf '\xff\xfe ok \033[31mred\033[0m \033]0;title\007x\n10%%\r50%%\r100%%\n'"
    )
    assert r.output == "\ufffd\ufffd ok red x\n100%\n"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"cmd": ""}, "`cmd` is empty"),
        ({"cmd": "   \n"}, "`cmd` is empty"),
        ({"cmd": 5}, "`cmd` should be a string"),
        ({"cmd": "echo \0x"}, "NUL byte"),
        ({"cmd": "x" * (1 << 20)}, "limit is 100000"),
        ({"cmd": "true", "bg_after": -1}, "`bg_after` must be 0..60"),
        ({"cmd": "true", "bg_after": 61}, "`bg_after` must be 0..60"),
        ({"cmd": "true", "bg_after": "5"}, "`bg_after` should be a number"),
        ({"cmd": "true", "timeout": 0}, "`timeout` must be 1..3600"),
        ({"cmd": "true", "timeout": 3601}, "`timeout` must be 1..3600"),
        ({"cmd": "true", "timeout": 0.5}, "`timeout` must be 1..3600"),
        ({"cmd": "true", "cwd": 5}, "`cwd` should be a string, not number 5"),
        ({"cmd": "true", "timeout": "x"}, "`timeout` should be a number"),
        ({"cmd": "true", "timeout": True}, "`timeout` should be a number"),
    ],
)
async def test_bad_requests_raise_one_clear_error(mgr, kw, message):
    cmd = kw.pop("cmd")
    with pytest.raises(UsageError, match=message):
        mgr.start(cmd, unsandboxed_ok=True, **kw)
    assert mgr.sessions == {}


async def test_unsandboxed_run_requires_explicit_approval(mgr):
    with pytest.raises(SpawnError, match="needs the user's approval"):
        mgr.start("true")


async def test_hundred_runs_in_a_row(mgr):
    sessions = [start(mgr, f"echo {i}") for i in range(100)]
    results = await asyncio.gather(*(mgr.wait_result(s.id) for s in sessions))
    assert [r.output for r in results] == [f"{i}\n" for i in range(100)]
    assert len({s.id for s in sessions}) == 100


async def test_background_session_limit(tmp_path):
    cfg = parse_config({"sandbox": {"backend": "none"}, "sessions": {"max_background": 2}})
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "s"))
    os.makedirs(m.state_dir)
    try:
        for _ in range(2):
            m.start("sleep 300", bg_after=0.1, unsandboxed_ok=True)
        with pytest.raises(UsageError, match="limit 2"):
            m.start("sleep 300", bg_after=0.1, unsandboxed_ok=True)
    finally:
        await m.shutdown()


async def test_live_output_events_are_throttled_and_complete(mgr):
    s = start(mgr, "for i in $(seq 1 50); do echo line$i; sleep 0.01; done", live=True)
    await mgr.wait_result(s.id)
    chunks = [p.data for n, p in mgr.events if n == "output" and p.id == s.id]
    assert "".join(chunks) == "".join(f"line{i}\n" for i in range(1, 51))
    assert len(chunks) < 25  # throttled: far fewer events than lines


async def test_shutdown_kills_everything(tmp_path):
    cfg = parse_config({"sandbox": {"backend": "none"}})
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "s"))
    os.makedirs(m.state_dir)
    sessions = [
        m.start("setsid sleep 300 & sleep 301", bg_after=0.1, unsandboxed_ok=True) for _ in range(3)
    ]
    wait_for(lambda: all(len(s.tracker.members()) >= 2 for s in sessions), 5)
    pids = [p for s in sessions for p in s.tracker.members()]
    await m.shutdown()
    wait_for(lambda: not alive(pids), 5)
    assert not os.path.exists(m.state_dir)


class FailingBackend:
    """A backend whose sandbox cannot be built (the error path of a deferred start)."""

    name = "none"
    isolates = False

    def availability(self):
        from run_bash.sandbox.base import Availability

        return Availability(True)

    def spawn(self, spec):
        raise SpawnError("cannot build the sandbox: test")


async def test_deferred_start_returns_at_once_and_reports_spawn_failure(mgr):
    mgr._backends["none"] = FailingBackend()
    s = mgr.start("true", unsandboxed_ok=True, defer=True)  # never raises
    # Nothing to build off the loop without a sandbox: it started (and failed) on the call.
    assert s.id in mgr.sessions and s.status == "failed"
    r = await asyncio.wait_for(mgr.wait_result(s.id), 5)
    assert r.status == "failed"
    assert r.error == "cannot build the sandbox: test"
    assert [n for n, p in mgr.events if getattr(p, "id", None) == s.id] == ["result"]
    assert os.listdir(mgr.state_dir) == []


@pytest.mark.parametrize("backend", CONFINING_BACKENDS)
async def test_kill_before_a_deferred_start_prevents_it(tmp_path, backend):
    """A sandboxed run is built off the loop: killed before it is, it never starts."""
    cfg = parse_config({"sandbox": {"backend": backend}})
    if not get_backend(backend, cfg).availability().ok:
        pytest.skip(f"{backend} is not available here")
    m = SessionManager(cfg, loop=asyncio.get_running_loop(), state_dir=str(tmp_path / "state"))
    os.makedirs(m.state_dir, mode=0o700)
    proj = tmp_path / "proj"
    proj.mkdir()
    try:
        s = m.start("touch should-not-exist", defer=True, cwd=str(proj))
        r = await m.kill(s.id)
        assert r.status == "killed" and "killed before it started" in r.error
        assert not (proj / "should-not-exist").exists()
        # Control: the same start, not killed, runs.
        s = m.start("touch should-exist", defer=True, cwd=str(proj))
        r = await asyncio.wait_for(m.wait_result(s.id), 60)
        assert r.exit_code == 0 and (proj / "should-exist").exists()
    finally:
        await m.shutdown()


async def test_results_are_dataclasses_with_one_plain_wire_form(mgr):
    import json

    import msgpack

    r = await run(mgr, "echo hi")
    wire = r.to_wire()
    assert wire["output"] == "hi\n" and wire["notices"] == [] and wire["exit_code"] == 0
    assert "error" not in wire  # unset optional fields are absent (Lua would see a truthy vim.NIL)
    assert json.loads(json.dumps(wire)) == wire
    assert msgpack.unpackb(msgpack.packb(wire)) == wire
    info = mgr.list()[0].to_wire()
    assert info["id"] == r.id and "output" not in info and set(info) < set(wire)


async def test_live_output_that_floods_is_cut_with_a_marker(tmp_path):
    """A live view gets at most about two chunks per interval: a burst beyond that is replaced by
    a marker that says how much was left out; the output file keeps everything."""
    events: list[tuple[str, object]] = []
    cfg = parse_config({"sandbox": {"backend": "none"}, "output": {"live_interval_ms": 2000}})
    m = SessionManager(
        cfg,
        loop=asyncio.get_running_loop(),
        on_event=lambda n, p: events.append((n, p)),
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(m.state_dir, mode=0o700)
    try:
        s = m.start(
            "head -c 1000000 /dev/zero | tr '\\0' x; echo; echo tail-end",
            unsandboxed_ok=True,
            live=True,
        )
        r = await asyncio.wait_for(m.wait_result(s.id), 30)
        shown = "".join(p.data for n, p in events if n == "output")
        assert "bytes not shown live; see the output file" in shown
        assert shown.endswith("tail-end\n") and len(shown) < 300_000
        assert r.output_bytes == 1_000_000 + len("\ntail-end\n")  # the file has every byte
    finally:
        await m.shutdown()


async def test_a_carriage_return_cannot_hide_text_from_agent_live_view_or_output(mgr):
    s = start(
        mgr, "printf 'rm -rf ~ done\\rAll 42 tests passed\\n'; printf '10%%\\r100%%\\n'", live=True
    )
    r = await asyncio.wait_for(mgr.wait_result(s.id), 30)
    shown = "rm -rf ~ done\u240dAll 42 tests passed\n100%\n"
    assert r.output == shown
    assert "".join(p.data for n, p in mgr.events if n == "output" and p.id == s.id) == shown
    assert mgr.output(s.id, tail=5).output == shown


async def test_an_orphan_that_left_its_run_is_reaped_when_it_exits(mgr):
    """A process that left its run (its own session, no tag: the sweep cannot know it) is
    reparented to the host, its subreaper; once it exits it is reaped at the next run's end,
    not kept as a zombie. Control: it was a zombie child of this process before that run."""
    r = await run(mgr, "setsid env -i /bin/sleep 1 >/dev/null 2>&1 & echo $!; sleep 0.5")
    pid = int(r.output.split()[0])
    await asyncio.wait_for(mgr.sessions[r.id].done.wait(), 30)
    await until(lambda: proc_state(pid) == "Z", 10)
    assert proc_parent(pid) == os.getpid()
    r2 = await run(mgr, "true")
    await asyncio.wait_for(mgr.sessions[r2.id].done.wait(), 30)
    assert not os.path.exists(f"/proc/{pid}")


def proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def proc_parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def ready_made(m) -> tuple[str, str]:
    """The output file and temp dir made ahead of the next run (after a run was let go of)."""
    files = [f for f in os.listdir(m.state_dir) if f.startswith("ready-")]
    dirs = [d for d in os.listdir(m.temp_root) if d.startswith("tmp-run-")]
    assert len(files) == 1 and len(dirs) == 1, (files, dirs)
    return os.path.join(m.state_dir, files[0]), os.path.join(m.temp_root, dirs[0])


async def test_the_next_run_takes_the_files_made_ahead_of_it_only_as_made(mgr):
    """After a run, its successor's output file and temp dir are made ahead of it; the next run
    takes them (renamed to its own output file name). One an unsandboxed run changed meanwhile
    (written to, linked elsewhere, a file put in the dir) is dropped, not taken."""
    first = await run(mgr, "true")
    await mgr.sessions[first.id].done.wait()
    out, tmp = ready_made(mgr)
    ino = os.stat(out).st_ino
    r = await run(mgr, 'echo "$TMPDIR"; ls -A "$TMPDIR"')
    assert r.output == f"{tmp}\n", r.output  # control: what was made ahead is what it took
    assert os.stat(r.output_file).st_ino == ino and not os.path.exists(out)
    await mgr.sessions[r.id].done.wait()
    for tamper in ("write", "link", "plant"):
        out, tmp = ready_made(mgr)
        held = os.open(out, os.O_RDONLY)  # its inode number stays its own while held
        ino = os.fstat(held).st_ino
        if tamper == "write":
            Path(out).write_text("planted by an earlier run\n")
        elif tamper == "link":
            os.link(out, out + ".kept")
        else:
            Path(tmp, "planted").write_text("x")
        r = await run(mgr, 'echo "$TMPDIR"; ls -A "$TMPDIR"')
        took_file = os.stat(r.output_file).st_ino == ino
        took_dir = r.output == f"{tmp}\n"
        if tamper == "plant":
            assert took_file and not took_dir and "planted" not in r.output, r.output
            assert not os.path.exists(tmp)
        else:
            assert not took_file and took_dir, tamper
            assert not os.path.exists(out)
            assert Path(r.output_file).read_text() == r.output
        if tamper == "link":
            os.unlink(out + ".kept")
        os.close(held)
        await mgr.sessions[r.id].done.wait()


async def test_an_output_files_reserved_space_is_given_back_once_the_run_is_let_go_of(mgr):
    s = start(mgr, "echo hello; sleep 30")
    await until(lambda: s.capture is not None and s.capture.total > 0)
    # Control: while it runs, its output file keeps space reserved past what it wrote.
    assert os.stat(s.capture.path).st_blocks * 512 >= 1024 * 1024
    r = await mgr.kill(s.id)
    await s.done.wait()
    st = os.stat(r.output_file)
    assert st.st_size == len("hello\n") and st.st_blocks * 512 <= 4096
