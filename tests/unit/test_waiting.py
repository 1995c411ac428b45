"""Waiting on a session's output (SessionManager, real processes, the "none" backend): readiness of a
background run (`wait_for`), `wait` for a match or the exit, and the tail that goes with the end."""

from __future__ import annotations

import asyncio
import os

import pytest

from run_bash.config import parse_config
from run_bash.errors import SessionError, UsageError
from run_bash.sessions import SessionManager
from tests.conftest import alive, until


@pytest.fixture
async def mgr(tmp_path):
    events: list[tuple[str, dict]] = []
    cfg = parse_config({"sandbox": {"backend": "none"}})
    m = SessionManager(
        cfg,
        loop=asyncio.get_running_loop(),
        on_event=lambda n, p: events.append((n, p.to_wire())),
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(m.state_dir, mode=0o700)
    m.events = events  # type: ignore[attr-defined]
    yield m
    await m.shutdown()


def start(m, cmd, **kw):
    return m.start(cmd, unsandboxed_ok=True, **kw)


async def result(m, s):
    return await asyncio.wait_for(m.wait_result(s.id), 30)


# -- readiness: wait_for on a background run -------------------------------------------------------


async def test_ready_when_a_line_matches(mgr):
    s = start(
        mgr,
        "echo booting; sleep 0.2; printf 'Listen'; sleep 0.2; echo 'ing on :8080'; sleep 60",
        bg_after=30,
        wait_for=r"Listening on :\d+",
    )
    r = await result(mgr, s)
    assert r.status == "running"
    assert r.ready == "matched" and r.matched_line == "Listening on :8080"
    assert r.wait_for == r"Listening on :\d+"
    assert r.ready_after_s < 30  # the result did not wait for bg_after
    assert r.output == "booting\nListening on :8080\n"
    assert s.waiters == []  # matching stopped with the result


async def test_not_ready_when_bg_after_passes_first(mgr):
    s = start(mgr, "echo booting; sleep 60", bg_after=1, wait_for="Listening")
    r = await result(mgr, s)
    assert r.status == "running" and r.ready == "timeout" and r.matched_line is None
    assert r.output == "booting\n"
    assert s.waiters == []
    # The session keeps running: a later line is new output for `output`.
    assert mgr.sessions[s.id].running


async def test_exit_before_the_match(mgr):
    s = start(mgr, "echo 'port in use' >&2; exit 3", bg_after=30, wait_for="Listening")
    r = await result(mgr, s)
    assert r.status == "exited" and r.exit_code == 3
    assert r.ready == "exited" and r.matched_line is None
    assert r.output == "port in use\n"


async def test_the_last_line_without_newline_matches_at_exit(mgr):
    s = start(mgr, "printf 'ready'", bg_after=30, wait_for="^ready$")
    r = await result(mgr, s)
    assert r.status == "exited" and r.ready == "matched" and r.matched_line == "ready"


async def test_a_bad_pattern_starts_nothing(mgr):
    marker = os.path.join(mgr.state_dir, "ran")
    with pytest.raises(UsageError, match="not a valid regular expression"):
        start(mgr, f"touch {marker}", bg_after=5, wait_for="(unclosed")
    assert mgr.sessions == {}
    # Control: the same command with a valid pattern runs.
    s = start(mgr, f"touch {marker}", bg_after=5, wait_for="x")
    await result(mgr, s)
    assert os.path.exists(marker)


async def test_wait_for_needs_bg_after(mgr):
    with pytest.raises(UsageError, match="`wait_for` needs `bg_after`"):
        start(mgr, "true", wait_for="x")
    assert mgr.sessions == {}


async def test_a_runaway_pattern_is_dropped_and_the_session_keeps_running(mgr):
    cmd = "printf 'a%.0s' $(seq 40); echo b; sleep 60"
    s = start(mgr, cmd, bg_after=30, wait_for=r"(a+)+$")
    r = await result(mgr, s)
    assert r.ready == "slow" and r.status == "running"
    # Control: the same output with a sane pattern matches.
    s2 = start(mgr, cmd, bg_after=30, wait_for=r"a+b$")
    r2 = await result(mgr, s2)
    assert r2.ready == "matched" and r2.matched_line == "a" * 40 + "b"


# -- wait --------------------------------------------------------------------------------------------


async def background(m, cmd, first="started"):
    s = start(m, f"echo {first}; {cmd}", bg_after=30, wait_for=first)
    r = await result(m, s)
    assert r.ready == "matched"
    return s


async def test_wait_returns_at_a_match_in_new_output(mgr):
    s = await background(mgr, "sleep 0.3; echo 'compiled ok'; sleep 60")
    page = await mgr.wait(s.id, wait_for="compiled", timeout=30)
    assert page.outcome == "matched" and page.matched_line == "compiled ok"
    assert page.status == "running" and page.output == "compiled ok\n"
    assert page.waited_s < 30


async def test_wait_finds_a_match_already_in_unread_output(mgr):
    s = await background(mgr, "sleep 0.2; echo 'compiled ok'; sleep 60")
    await until(lambda: s.capture.written >= len("started\ncompiled ok\n"))
    assert s.read_offset == len("started\n")  # the result read up to here
    page = await mgr.wait(s.id, wait_for="compiled", timeout=30)
    assert page.outcome == "matched" and page.waited_s < 1


async def test_wait_ignores_output_already_read(mgr):
    s = await background(
        mgr, "sleep 0.2; echo 'compiled ok'; sleep 0.5; echo 'compiled again'; sleep 60"
    )
    read: list[str] = []
    await until(lambda: read.append(mgr.output(s.id).output) or "compiled ok" in "".join(read))
    page = await mgr.wait(s.id, wait_for="compiled", timeout=30)
    assert page.outcome == "matched" and page.matched_line == "compiled again"


async def test_wait_returns_at_exit_with_code_and_new_output(mgr):
    s = await background(mgr, "sleep 0.3; echo bye; exit 4")
    page = await mgr.wait(s.id, timeout=30)
    assert page.outcome == "exited" and page.status == "exited" and page.exit_code == 4
    assert page.output == "bye\n"
    # A pattern that never comes: the exit ends the wait as well.
    s = await background(mgr, "sleep 0.3; exit 0")
    page = await mgr.wait(s.id, wait_for="never", timeout=30)
    assert page.outcome == "exited" and page.exit_code == 0


async def test_wait_times_out_and_the_session_keeps_running(mgr):
    s = await background(mgr, "sleep 60")
    page = await mgr.wait(s.id, wait_for="never", timeout=1)
    assert page.outcome == "timeout" and page.status == "running"
    assert s.waiters == []
    page = await mgr.wait(s.id, timeout=1)
    assert page.outcome == "timeout"
    assert alive([s.pid])


async def test_wait_on_an_ended_session_returns_at_once(mgr):
    s = start(mgr, "echo done; exit 2", bg_after=1)
    await result(mgr, s)
    page = await asyncio.wait_for(mgr.wait(s.id, wait_for="x", timeout=60), 2)
    assert page.outcome == "ended" and page.exit_code == 2 and page.waited_s < 1


async def test_two_waits_on_one_session(mgr):
    s = await background(mgr, "sleep 0.3; echo one; sleep 0.3; echo two; sleep 60")
    one, two = await asyncio.gather(
        mgr.wait(s.id, wait_for="one", timeout=30), mgr.wait(s.id, wait_for="two", timeout=30)
    )
    assert (one.outcome, one.matched_line) == ("matched", "one")
    assert (two.outcome, two.matched_line) == ("matched", "two")


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ({"sid": "nosuch"}, SessionError, "unknown session id 'nosuch'"),
        ({"timeout": 0}, UsageError, "must be 1..60 seconds"),
        ({"timeout": 61}, UsageError, "must be 1..60 seconds"),
        ({"timeout": "soon"}, UsageError, "`timeout` should be a number"),
        ({"wait_for": "[a-"}, UsageError, "not a valid regular expression"),
        ({"wait_for": 3}, UsageError, "`wait_for` should be a string"),
    ],
)
async def test_bad_wait_arguments_are_one_clear_error(mgr, args, error, message):
    s = await background(mgr, "sleep 60")
    kw = {"sid": s.id, **args}
    with pytest.raises(error, match=message):
        mgr.wait(kw.pop("sid"), **kw)
    assert s.waiters == []


# -- the end of a background session ---------------------------------------------------------------


async def test_exited_event_carries_the_last_lines(mgr):
    s = start(mgr, "seq 1 100; sleep 0.3; exit 1", bg_after=0.1)
    r = await result(mgr, s)
    assert r.status == "running"
    await until(lambda: [p for n, p in mgr.events if n == "exited"])
    [end] = [p for n, p in mgr.events if n == "exited"]
    assert end["id"] == s.id and end["exit_code"] == 1
    assert end["tail"] == "\n".join(str(i) for i in range(81, 101))


async def test_two_sessions_ending_together_give_two_exited_events(mgr):
    go = os.path.join(mgr.state_dir, "go")
    a = start(mgr, f"while [ ! -e {go} ]; do sleep 0.05; done; echo a", bg_after=0.1)
    b = start(mgr, f"while [ ! -e {go} ]; do sleep 0.05; done; exit 7", bg_after=0.1)
    await result(mgr, a)
    await result(mgr, b)
    open(go, "w").close()
    await until(lambda: len([p for n, p in mgr.events if n == "exited"]) == 2)
    got = {p["id"]: p for n, p in mgr.events if n == "exited"}
    assert got[a.id]["exit_code"] == 0 and got[a.id]["tail"] == "a"
    assert got[b.id]["exit_code"] == 7
