"""`wait_for` on run and `action = "wait"` through the tool table, driven by the stand-in orchestrator
of test_tool.py (real host, real processes, the "none" backend)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.integration.test_tool import FACTS, Tool

pytestmark = pytest.mark.nvim


@pytest.fixture
def nosandbox(editor: Any) -> Tool:
    t = Tool(editor)
    t.setup({"sandbox": {"backend": "none"}})
    return t


def session_id(llm: str) -> str:
    return llm.split("Session ID: ")[1].split("\n")[0]


# -- readiness -----------------------------------------------------------------------------------------


def test_ready_by_match(nosandbox: Tool) -> None:
    rec = nosandbox.call(
        {
            "cmd": "echo booting; sleep 0.3; echo 'Listening on :4000'; sleep 60",
            "bg_after": 30,
            "wait_for": "Listening on",
        }
    )
    assert rec["status"] == "success"
    first, ready = rec["llm"].split("\n")[:2]
    assert first == "Background command started."
    assert re.fullmatch(r'Ready: matched "Listening on" after [\d.]+ s: Listening on :4000', ready)
    assert rec["llm"].endswith("Partial output:\n\nbooting\nListening on :4000\n")
    assert ready in rec["user"]
    assert "In the background once a line matches `Listening on` (at most 30s)." not in rec["llm"]


def test_not_ready_by_timeout(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo booting; sleep 60", "bg_after": 1, "wait_for": "Listening"})
    lines = rec["llm"].split("\n")
    assert lines[0] == "Background command started."
    assert re.fullmatch(r'Not ready after [\d.]+ s \(no match for "Listening"\)\.', lines[1])
    sid = session_id(rec["llm"])
    assert f'{{"action": "wait", "session_id": "{sid}", "wait_for": "<regex>"}}' in rec["llm"]


def test_exit_before_the_match(nosandbox: Tool) -> None:
    rec = nosandbox.call(
        {"cmd": "echo 'EADDRINUSE' >&2; exit 3", "bg_after": 30, "wait_for": "Listening"}
    )
    assert rec["status"] == "error"
    assert rec["llm"].startswith(
        'Failed (exit: 3).\nNote: Not ready: the command ended before a line matched "Listening".'
    )
    assert rec["llm"].endswith("EADDRINUSE\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"cmd": "touch ran", "bg_after": 5, "wait_for": "(oops"},
            "not a valid regular expression",
        ),
        ({"cmd": "touch ran", "wait_for": "ready"}, "`wait_for` needs `bg_after`"),
    ],
)
def test_a_bad_pattern_is_one_error_and_starts_nothing(
    nosandbox: Tool, args: dict[str, Any], message: str
) -> None:
    rec = nosandbox.call(args)
    assert rec["asked"] is False and rec["status"] == "error"
    assert rec["llm"].startswith("Error: `wait_for`") and message in rec["llm"]
    assert "\n" not in rec["llm"]
    assert not (Path(nosandbox.ed.work) / "ran").exists()
    assert not nosandbox.audit()  # not even a decision
    # Control: with a good pattern the same command runs.
    ok = nosandbox.call({**args, "bg_after": 5, "wait_for": "x"})
    assert ok["asked"] is True and ok["status"] == "success"
    assert (Path(nosandbox.ed.work) / "ran").exists()


# -- wait ----------------------------------------------------------------------------------------------


def start_bg(tool: Tool, cmd: str) -> str:
    rec = tool.call({"cmd": f"echo started; {cmd}", "bg_after": 30, "wait_for": "started"})
    assert "Ready: matched" in rec["llm"], rec["llm"]
    return session_id(rec["llm"])


def test_wait_by_match(nosandbox: Tool) -> None:
    sid = start_bg(nosandbox, "sleep 0.3; echo 'built in 12ms'; sleep 60")
    rec = nosandbox.call({"action": "wait", "session_id": sid, "wait_for": r"built in \d+ms"})
    assert rec["asked"] is False and rec["status"] == "success"
    head, state = rec["llm"].split("\n")[:2]
    assert re.fullmatch(r'Matched "built in \\d\+ms" after [\d.]+ s: built in 12ms', head)
    assert state == f"Session {sid}: still running."
    assert rec["llm"].endswith("New output since the last read:\n\nbuilt in 12ms\n")
    assert rec["user"].startswith(f"**run_bash** wait on session `{sid}`: Matched")


def test_wait_by_exit(nosandbox: Tool) -> None:
    sid = start_bg(nosandbox, "sleep 0.3; echo bye; exit 4")
    rec = nosandbox.call({"action": "wait", "session_id": sid, "timeout": 30})
    head, state = rec["llm"].split("\n")[:2]
    assert re.fullmatch(rf"Session {sid} exited 4 after [\d.]+ s of waiting\.", head)
    assert state == f"Session {sid}: ended (exit: 4)."
    assert rec["llm"].endswith("bye\n")


def test_wait_by_timeout(nosandbox: Tool) -> None:
    sid = start_bg(nosandbox, "sleep 60")
    rec = nosandbox.call({"action": "wait", "session_id": sid, "wait_for": "never", "timeout": 1})
    assert re.match(r'No match for "never" after [\d.]+ s\.\n', rec["llm"])
    assert f"Session {sid}: still running." in rec["llm"]
    rec = nosandbox.call({"action": "wait", "session_id": sid, "timeout": 1})
    assert re.match(rf"Session {sid} did not end within [\d.]+ s\.\n", rec["llm"])


def test_wait_on_an_ended_session_and_an_unknown_one(nosandbox: Tool) -> None:
    sid = session_id(nosandbox.call({"cmd": "echo quick; exit 2", "bg_after": 5})["llm"])
    rec = nosandbox.call({"action": "wait", "session_id": sid, "wait_for": "x", "timeout": 60})
    assert rec["llm"].startswith(f"Session {sid} had already ended (exit: 2).\n")
    rec = nosandbox.call({"action": "wait", "session_id": "zzzzzz"})
    assert rec["status"] == "error"
    assert rec["llm"].startswith("Error: unknown session id 'zzzzzz'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"action": "wait"}, '`session_id` is required for action "wait"'),
        ({"action": "wait", "session_id": "a", "timeout": 61}, "must be 1..60 seconds"),
        ({"action": "wait", "session_id": "a", "wait_for": "a)"}, "not a valid regular expression"),
    ],
)
def test_bad_wait_arguments(nosandbox: Tool, args: dict[str, Any], message: str) -> None:
    rec = nosandbox.call(args)
    assert rec["status"] == "error" and message in rec["llm"] and "\n" not in rec["llm"]


# -- what the agent and the user read --------------------------------------------------------------


def test_schema_teaches_wait_for_and_wait(nosandbox: Tool) -> None:
    schema = nosandbox.ed.lua(
        "return require('run_bash.tool_schema').schema(...)",
        {**FACTS, "max_wait": 60, "default_wait": 30, "notify_agent": "next_turn"},
    )
    props = schema["function"]["parameters"]["properties"]
    assert "wait" in props["action"]["enum"]
    assert (
        props["wait_for"]["type"] == "string"
        and "Python regular expression" in (props["wait_for"]["description"])
    )
    assert "For 'wait': how long to wait (1-60, default 30)" in props["timeout"]["description"]
    desc = schema["function"]["description"]
    assert "Start a server or watcher with `bg_after` plus `wait_for`" in desc
    assert '{"action": "wait", "session_id": "...", "wait_for": "..."}' in desc
    assert "When a background session you started ends, you are told" in desc
    off = nosandbox.ed.lua(
        "return require('run_bash.tool_schema').description(...)", {**FACTS, "notify_agent": False}
    )
    assert "You are not told when a background session ends" in off


@pytest.mark.parametrize(
    ("info", "line"),
    [
        (
            {
                "id": "abc123",
                "cmd": "npm run dev",
                "status": "exited",
                "exit_code": 1,
                "duration_s": 252.4,
            },
            "run_bash: session abc123 (npm run dev) exited 1 after 4m12s",
        ),
        (
            {
                "id": "a",
                "cmd": "make watch\nmore",
                "status": "killed",
                "killed": True,
                "signal": 15,
                "duration_s": 2.34,
            },
            "run_bash: session a (make watch ...) was killed after 2.3s",
        ),
        (
            {
                "id": "b",
                "cmd": "./srv",
                "status": "exited",
                "signal": 11,
                "exit_code": 139,
                "duration_s": 3725,
            },
            "run_bash: session b (./srv) crashed (signal 11) after 1h02m",
        ),
        (
            {
                "id": "c",
                "cmd": "x",
                "status": "timed_out",
                "timed_out": True,
                "exit_code": 124,
                "duration_s": 45,
            },
            "run_bash: session c (x) timed out after 45s",
        ),
        (
            {"id": "d", "cmd": "100% done", "status": "lost", "duration_s": 1},
            "run_bash: session d (100% done) was lost (the run_bash host exited) after 1.0s",
        ),
    ],
)
def test_the_exit_line(nosandbox: Tool, info: dict[str, Any], line: str) -> None:
    assert nosandbox.ed.lua("return require('run_bash.tool_format').exit_line(...)", info) == line


def test_the_exit_notice_for_the_agent(nosandbox: Tool) -> None:
    text = nosandbox.ed.lua(
        "return require('run_bash.tool_format').exit_notice(...)",
        {
            "id": "abc123",
            "cmd": "npm run dev",
            "status": "exited",
            "exit_code": 1,
            "duration_s": 252.4,
            "output_file": "/run/x/abc123.log",
            "tail": "Error: boom\n  at x",
        },
    )
    assert text == (
        "[run_bash] Background session abc123 (`npm run dev`) exited 1 after 4m12s; it is no "
        "longer running.\nSession ID: abc123\nOutput file: /run/x/abc123.log\n"
        "Last lines of output:\n\nError: boom\n  at x"
    )


def test_user_background_session_ends_with_a_notification_and_a_status_line(editor: Any) -> None:
    editor.lua("_G.__notes = {}; vim.notify = function(m, l) table.insert(_G.__notes, {m, l}) end")
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    go = Path(editor.work) / "go"
    editor.nvim.command(f"RunBash! -bg while [ ! -e {go} ]; do sleep 0.05; done; echo bye; exit 5")
    # :RunBash! always asks: accept in the approval window.
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 1)
    editor.nvim.input("a")
    # It went on in the background (bg_after passed): the buffer keeps following it.
    bg = wait_for(
        lambda: [n[0] for n in editor.lua("return _G.__notes") if "runs in the background" in n[0]]
    )
    sid = bg[0].split("session ")[1].split(" ")[0]
    go.touch()
    note = wait_for(lambda: [n for n in editor.lua("return _G.__notes") if " exited " in n[0]])
    assert re.fullmatch(
        rf"run_bash: session {sid} \(while \[ .*\) exited 5 after [\d.]+s", note[0][0]
    )
    assert note[0][1] == 3  # WARN: it failed
    buf = editor.lua("return vim.fn.bufnr(...)", f"run_bash://{sid}")
    lines = wait_for(
        lambda: (
            (ls := editor.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf))
            and ls[-1].startswith("[exit 5")
            and ls
        )
    )
    assert "bye" in lines


def test_a_session_lost_with_the_host_is_reported_as_ended(nosandbox: Tool) -> None:
    import psutil

    ed = nosandbox.ed
    ed.lua(
        """_G.__ended = {}
        vim.api.nvim_create_autocmd('User', { pattern = 'RunBashExited',
          callback = function(ev) table.insert(_G.__ended, ev.data) end })"""
    )
    r = ed.run_sync(
        {"cmd": "echo up; exec sleep 300", "bg_after": 5, "wait_for": "up", "unsandboxed_ok": True}
    )
    assert r["status"] == "running" and r["ready"] == "matched"
    keeper = psutil.Process(ed.nvim.funcs.jobpid(ed.lua("return require('run_bash')._job()")))
    keeper.children()[0].kill()  # the host crashes; the keeper takes the session with it
    [ended] = wait_for(lambda: ed.lua("return _G.__ended"))
    assert ended["id"] == r["id"] and ended["status"] == "lost"
    line = ed.lua("return require('run_bash.tool_format').exit_line(...)", ended)
    assert line.startswith(f"run_bash: session {r['id']} (echo up; exec sleep 300) was lost")
    notice = ed.lua("return require('run_bash.tool_format').exit_notice(...)", ended)
    assert "was lost (the run_bash host exited)" in notice and "printed nothing" not in notice


def test_seconds_read_as_in_the_issue(nosandbox: Tool) -> None:
    got = nosandbox.ed.lua(
        "local H = require('run_bash.tool_format')._H;"
        " return { H.secs(30.0), H.secs(2.34), H.secs(0.04), H.secs(9.96), H.secs(nil) }"
    )
    assert got == ["30", "2.3", "0.0", "10", "?"]
