"""The host's `wait` RPC, `wait_for` on `run`, the tool's arguments for them and the
`background.notify_agent` option: checked at the boundary, answered through events."""

from __future__ import annotations

import asyncio

import pytest

from run_bash.agent import tool_args
from run_bash.config import parse_config
from run_bash.errors import ConfigError, RunBashError, UsageError
from tests.conftest import until


def replies(svc, token):
    return [p for n, p in svc.events if n == "reply" and p["token"] == token]


async def test_wait_answers_with_a_reply_event(svc):
    info = svc.rpc(
        "run",
        (
            {
                "cmd": "echo up; sleep 0.3; echo ready; sleep 60",
                "bg_after": 30,
                "wait_for": "up",
                "unsandboxed_ok": True,
            },
        ),
    )
    await until(lambda: [p for n, p in svc.events if n == "result" and p["id"] == info["id"]])
    started = svc.rpc("wait", (info["id"], {"wait_for": "^ready$", "timeout": 30}, 7))
    assert started["id"] == info["id"] and started["status"] == "running"
    [reply] = await until(lambda: replies(svc, 7))
    r = reply["result"]
    assert r["outcome"] == "matched" and r["matched_line"] == "ready" and r["output"] == "ready\n"
    assert r["wait_for"] == "^ready$"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nosuch", {}, 1), "unknown session id 'nosuch'"),
        ((None, {"bogus": 1}, 1), "unknown wait option(s): bogus"),
        ((None, {"wait_for": "("}, 1), "not a valid regular expression"),
        ((None, {"timeout": 90}, 1), "must be 1..60 seconds"),
        ((None, {}, 1, 2), "wait takes (id, opts, token)"),
    ],
)
async def test_bad_wait_requests_are_one_error_at_once(svc, args, message):
    info = svc.rpc("run", ({"cmd": "sleep 60", "bg_after": 1, "unsandboxed_ok": True},))
    args = tuple(info["id"] if a is None else a for a in args)
    with pytest.raises(RunBashError, match=message.replace("(", r"\(").replace(")", r"\)")):
        svc.rpc("wait", args)
    assert not [n for n, _ in svc.events if n == "reply"]


async def test_run_with_a_bad_pattern_starts_nothing_and_writes_no_audit_line(svc, tmp_path):
    marker = tmp_path / "ran"
    spec = {"cmd": f"touch {marker}", "bg_after": 5, "unsandboxed_ok": True}
    with pytest.raises(UsageError, match="not a valid regular expression"):
        svc.run({**spec, "wait_for": "*oops"})
    assert svc.mgr.sessions == {}
    assert not svc.audit_path.exists() or "decision" not in svc.audit_path.read_text()
    # Control: a valid pattern, the same command: it runs.
    info = svc.run({**spec, "wait_for": "x"})
    await asyncio.wait_for(svc.mgr.wait_result(info["id"]), 10)
    assert marker.exists()


async def test_facts_say_how_the_agent_is_told_and_the_wait_limits(svc):
    facts = svc.facts()
    assert facts["notify_agent"] == "next_turn"
    assert facts["max_wait"] == 60 and facts["default_wait"] == 30
    svc.setup({"sandbox": {"backend": "none"}, "background": {"notify_agent": False}})
    assert svc.facts()["notify_agent"] is False


@pytest.mark.parametrize("value", ["next_turn", "submit", False])
def test_notify_agent_accepts_its_three_values(value):
    assert parse_config({"background": {"notify_agent": value}}).background.notify_agent == value


@pytest.mark.parametrize("value", [True, "later", 1, None])
def test_notify_agent_refuses_anything_else(value):
    if value is None:
        assert parse_config({"background": {}}).background.notify_agent == "next_turn"
        return
    with pytest.raises(ConfigError) as err:
        parse_config({"background": {"notify_agent": value}})
    assert '`background.notify_agent` should be "next_turn", "submit" or false' in str(err.value)


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        (
            {"cmd": "npm run dev", "bg_after": 30, "wait_for": "Local:"},
            {
                "action": "run",
                "cmd": "npm run dev",
                "bg_after": 30,
                "wait_for": "Local:",
                "skip_sandbox": False,
            },
        ),
        (
            {"action": "wait", "session_id": " abc ", "wait_for": "ready", "timeout": "20"},
            {"action": "wait", "session_id": "abc", "wait_for": "ready", "timeout": 20},
        ),
        ({"action": "wait", "session_id": "abc"}, {"action": "wait", "session_id": "abc"}),
    ],
)
def test_tool_arguments_for_waiting(raw, normal):
    assert tool_args(raw) == normal


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"action": "wait"}, '`session_id` is required for action "wait"'),
        ({"action": "wait", "session_id": "a", "timeout": 0}, "must be 1..60 seconds"),
        ({"action": "wait", "session_id": "a", "timeout": 61}, "must be 1..60 seconds"),
        ({"action": "wait", "session_id": "a", "wait_for": "(x"}, "not a valid regular expression"),
        ({"action": "wait", "session_id": "a", "wait_for": ""}, "`wait_for` is empty"),
        ({"cmd": "make", "wait_for": "done"}, "`wait_for` needs `bg_after`"),
        ({"cmd": "make", "bg_after": 5, "wait_for": ["x"]}, "`wait_for` should be a string"),
        ({"cmd": "make", "bg_after": 5, "wait_for": "a{2,1}"}, "not a valid regular expression"),
    ],
)
def test_bad_tool_arguments_for_waiting(raw, message):
    with pytest.raises(UsageError) as err:
        tool_args(raw)
    assert message in str(err.value)
