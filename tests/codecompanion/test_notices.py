"""Background sessions that report back, inside a real CodeCompanion Chat (fake adapter,
CodeCompanion's own HTTP mock): readiness and `wait` in a chat, and the notice a chat gets when a
background session its agent started ends: a visible line for the user, a hidden message in the
agent's next request, `notify_agent = "submit"` starting a turn only when the chat is idle."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.codecompanion.test_chat import Chat, pytestmark  # noqa: F401  (same skips)
from tests.conftest import wait_for

NOTICE = "[run_bash] Background session"


@pytest.fixture
def chat(editor: Any) -> Chat:
    return Chat(editor)


def setup(chat: Chat, background: str = "nil") -> Chat:
    chat.setup(f'{{ sandbox = {{ backend = "none" }}, background = {background} }}')
    return chat


def start_bg(chat: Chat, script: str) -> str:
    """The agent starts `script` in the background; returns its session id."""
    text = chat.round(
        {"cmd": f"echo started; {script}", "bg_after": 30, "wait_for": "^started$"}, approve="g2"
    )
    assert text.startswith("Background command started.\nReady: matched"), text
    return text.split("Session ID: ")[1].split("\n")[0]


def gated(chat: Chat, name: str, after: str) -> tuple[Path, str]:
    """A script that waits for the file `name` in the work dir, then does `after`."""
    gate = Path(chat.ed.work) / name
    return gate, f"while [ ! -e {gate} ]; do sleep 0.05; done; {after}"


def requests(chat: Chat) -> int:
    return chat.ed.lua("return H.request_count()")


def messages(chat: Chat, n: int | None = None) -> list[dict[str, Any]]:
    return chat.ed.lua("return H.request_messages(...)", n)


def hidden_notices(msgs: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in msgs if m["content"].startswith(NOTICE)]


def tick(chat: Chat) -> None:
    """Let everything already scheduled in Neovim run (a submit decided on the next tick)."""
    chat.ed.lua("H.after_tick()")
    wait_for(lambda: chat.ed.lua("return _G.__tick"))


def shown(chat: Chat, sid: str) -> str:
    return wait_for(lambda: re.search(rf"^run_bash: session {sid} .*$", chat.buffer(), re.M))[0]


# -- readiness and wait ------------------------------------------------------------------------------


def test_ready_then_wait_in_a_chat(chat: Chat) -> None:
    setup(chat)
    sid = start_bg(chat, "sleep 0.3; echo 'watching for changes'; sleep 60")
    assert "Ready: matched" in chat.buffer()
    text = chat.round({"action": "wait", "session_id": sid, "wait_for": "watching"})
    assert re.match(r'Matched "watching" after [\d.]+ s: watching for changes\n', text)
    assert f"Session {sid}: still running." in text
    gone = chat.round({"action": "wait", "session_id": "nosuch"})
    assert gone.startswith("Error: unknown session id 'nosuch'")


# -- the notice of the end ---------------------------------------------------------------------------


def test_the_end_is_shown_and_reaches_the_next_request(chat: Chat) -> None:
    setup(chat)
    gate, script = gated(chat, "go", "echo 'fatal: port 3000 in use'; exit 1")
    sid = start_bg(chat, script)
    assert chat.ed.lua("return H.idle()")
    before = requests(chat)
    gate.touch()
    line = shown(chat, sid)
    assert re.fullmatch(
        rf"run_bash: session {sid} \(echo started; .*\) exited 1 after [\d.]+s", line
    )
    assert "fatal: port" not in chat.buffer().split(line)[1]  # the details are for the agent
    tick(chat)
    assert requests(chat) == before  # next_turn: no turn of its own
    chat.ed.lua("H.send(...)", "what happened?", "It failed.")
    wait_for(lambda: requests(chat) == before + 1)
    msgs = messages(chat)
    [notice] = hidden_notices(msgs)
    assert f"Background session {sid} (`echo started; while" in notice
    assert "exited 1 after" in notice and notice.endswith("started\nfatal: port 3000 in use")
    hidden = next(m for m in msgs if m["content"] == notice)
    assert hidden["role"] == "user" and hidden["visible"] is False
    # It goes with the user's message, which is exactly what they typed.
    assert msgs[-1]["content"] == "what happened?"
    assert msgs.index(hidden) == len(msgs) - 2
    # Once only.
    chat.ed.lua("H.send(...)", "and now?", "Nothing new.")
    wait_for(lambda: requests(chat) == before + 2)
    assert hidden_notices(messages(chat)) == [notice]


def test_two_sessions_ending_together_give_two_notices(chat: Chat) -> None:
    setup(chat)
    gate, a = gated(chat, "go", "echo one; exit 0")
    _, b = gated(chat, "go", "echo two; exit 3")
    sid_a, sid_b = start_bg(chat, a), start_bg(chat, b)
    gate.touch()
    assert "exited 0" in shown(chat, sid_a) and "exited 3" in shown(chat, sid_b)
    before = requests(chat)
    chat.ed.lua("H.send(...)", "status?", "Both ended.")
    wait_for(lambda: requests(chat) == before + 1)
    notices = hidden_notices(messages(chat))
    assert len(notices) == 2
    assert {sid_a, sid_b} == {re.search(r"session (\w+) ", n)[1] for n in notices}


def test_submit_starts_a_turn_when_the_chat_is_idle(chat: Chat) -> None:
    setup(chat, '{ notify_agent = "submit" }')
    gate, script = gated(chat, "go", "exit 2")
    sid = start_bg(chat, script)
    assert chat.ed.lua("return H.idle()")
    before = requests(chat)
    chat.ed.lua("H.queue_text(...)", "The server stopped; restarting it.")
    gate.touch()
    shown(chat, sid)
    wait_for(lambda: requests(chat) == before + 1)
    msgs = messages(chat)
    [notice] = hidden_notices(msgs)
    assert msgs[-1]["content"] == notice and "exited 2" in notice  # no empty user message after it
    wait_for(lambda: "The server stopped; restarting it." in chat.buffer())
    wait_for(lambda: chat.ed.lua("return H.idle()"))  # the turn ended; the chat is the user's again


def test_submit_waits_while_the_user_is_typing(chat: Chat) -> None:
    setup(chat, '{ notify_agent = "submit" }')
    gate, script = gated(chat, "go", "exit 2")
    sid = start_bg(chat, script)
    chat.ed.lua("H.type_text(...)", "half a thought")
    assert not chat.ed.lua("return H.idle()")
    before = requests(chat)
    gate.touch()
    shown(chat, sid)
    tick(chat)
    assert requests(chat) == before  # not idle: no turn starts over the user's draft
    assert "half a thought" in chat.buffer()
    chat.ed.lua("H.send(...)", " and done", "Seen it.")
    wait_for(lambda: requests(chat) == before + 1)
    msgs = messages(chat)
    assert len(hidden_notices(msgs)) == 1
    assert msgs[-1]["content"] == "half a thought and done"  # the draft, then what was added


def test_submit_waits_for_the_turn_in_progress_to_end(chat: Chat) -> None:
    setup(chat, '{ notify_agent = "submit" }')
    gate, script = gated(chat, "go", "exit 9")
    sid = start_bg(chat, script)
    release, fg = gated(chat, "release", "echo tests passed")
    (cid,) = chat.submit({"cmd": fg})  # the agent runs a foreground command
    chat.wait_pending()
    chat.press("g2")
    wait_for(lambda: chat.ed.lua("return _G.__chat.tool_orchestrator ~= nil"))
    before = requests(chat)
    chat.ed.lua("H.queue_text(...)", "Noted: the server exited.")
    gate.touch()
    shown(chat, sid)
    tick(chat)
    assert requests(chat) == before  # a tool is running: not idle
    release.touch()
    # The gate files the test touched are the run's change set: its line follows the output.
    assert chat.result(cid).split("\nChanged files: ")[0].endswith("\ntests passed\n")
    wait_for(lambda: requests(chat) == before + 1)  # the turn ended: now it goes
    assert "exited 9" in hidden_notices(messages(chat))[0]
    wait_for(lambda: "Noted: the server exited." in chat.buffer())


def test_a_closed_chat_gets_nothing(chat: Chat) -> None:
    setup(chat)
    gate, script = gated(chat, "go", "exit 1")
    closed = start_bg(chat, script)
    chat.ed.lua("_G.__first = _G.__chat; H.chat()")  # a second chat, open
    other = start_bg(chat, script)
    before = requests(chat)
    chat.ed.lua("_G.__first:close()")
    gate.touch()
    assert "exited 1" in shown(chat, other)  # control: the open chat hears of its session
    tick(chat)
    assert f"session {closed} " not in chat.buffer()
    assert requests(chat) == before
    assert not [n for n in chat.notes() if "failed" in n or "error" in n.lower()], chat.notes()

    # Both sessions ended on the same gate, each on its own path: wait for this one's end too.
    def status() -> str:
        listed = chat.ed.lua("return require('run_bash').sessions_list()")
        return next(s["status"] for s in listed if s["id"] == closed)

    wait_for(lambda: status() != "running")
    assert status() == "exited"


def test_no_notice_when_the_agent_ended_it_or_already_knows(chat: Chat) -> None:
    setup(chat)
    killed = start_bg(chat, "sleep 60")
    text = chat.round({"action": "kill", "session_id": killed})
    assert text.startswith(f"Killed background session {killed}")
    tick(chat)
    assert f"run_bash: session {killed} " not in chat.buffer()
    # A wait that saw the exit: the user sees the line, the agent gets no second report.
    gate, script = gated(chat, "go", "exit 4")
    waited = start_bg(chat, script)
    (cid,) = chat.submit({"action": "wait", "session_id": waited, "timeout": 30})
    wait_for(lambda: chat.ed.lua("return _G.__chat.tool_orchestrator ~= nil"))
    gate.touch()
    assert re.match(rf"Session {waited} exited 4 after", chat.result(cid, timeout=30))
    assert "exited 4" in shown(chat, waited)
    wait_for(lambda: chat.ed.lua("return _G.__chat.tool_orchestrator == nil"))
    before = requests(chat)
    chat.ed.lua("H.send(...)", "ok?", "ok")
    wait_for(lambda: requests(chat) == before + 1)
    assert hidden_notices(messages(chat)) == []


def test_notify_agent_false_shows_the_line_only(chat: Chat) -> None:
    setup(chat, "{ notify_agent = false }")
    gate, script = gated(chat, "go", "exit 0")
    sid = start_bg(chat, script)
    gate.touch()
    assert "exited 0" in shown(chat, sid)
    before = requests(chat)
    chat.ed.lua("H.send(...)", "next", "ok")
    wait_for(lambda: requests(chat) == before + 1)
    assert hidden_notices(messages(chat)) == []
