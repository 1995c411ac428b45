"""The pause list is enforced by the host: ``run`` without ``approved`` holds a command that needs
the user, asks Lua with an ``approve`` event, and starts it only on the user's decision."""

from __future__ import annotations

import asyncio
import json

import pytest

from run_bash.config import parse_config
from run_bash.errors import UsageError
from run_bash.sandbox.base import get_backend


def asked(svc, sid):
    return [p for n, p in svc.events if n == "approve" and p["id"] == sid]


async def result_of(svc, sid):
    return (await asyncio.wait_for(svc.mgr.wait_result(sid), 20)).to_wire()


async def test_a_command_needing_approval_is_held_until_accepted(svc, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    info = svc.run({"cmd": f"rm -rf {victim}", "cwd": str(tmp_path)})
    assert info["status"] == "awaiting_approval"
    [ask] = asked(svc, info["id"])
    assert ask["answer"]["needs_approval"] is True and ask["answer"]["rule"] == "rm"
    assert ask["answer"]["cmd"] == f"rm -rf {victim}" and ask["cwd"] == str(tmp_path)
    held = svc.mgr.sessions[info["id"]]
    assert held.launched is None and held.capture is None  # nothing was spawned while waiting
    assert victim.exists()
    assert svc.decide(info["id"], "accept") is True
    r = await result_of(svc, info["id"])
    assert r["exit_code"] == 0 and not victim.exists()


@pytest.mark.parametrize(("decided", "status"), [("reject", "rejected"), ("cancel", "cancelled")])
async def test_rejected_or_cancelled_never_starts_and_is_forgotten(svc, tmp_path, decided, status):
    victim = tmp_path / "victim"
    victim.mkdir()
    info = svc.run({"cmd": f"rm -rf {victim}"})
    assert svc.decide(info["id"], decided, "not now") is True
    [r] = [p for n, p in svc.events if n == "result" and p["id"] == info["id"]]
    assert r["status"] == status and "nothing ran" in r["error"]
    assert ("reason: not now" in r["error"]) is (decided == "reject")
    assert victim.exists()
    assert info["id"] not in {s["id"] for s in svc.sessions()}
    records = [json.loads(x) for x in _lines(svc.audit_path)]
    [line] = [x for x in records if x["event"] == "decision"]
    [run] = [x for x in records if x["event"] == "run"]
    assert line["session_id"] == run["id"]
    assert line["decided_by"] == {"reject": "user_reject", "cancel": "user_cancel"}[decided]
    assert run["status"] == status and run["id"] == info["id"]


def _lines(path):
    return path.read_text().splitlines() if path.exists() else []


async def test_a_late_or_unknown_decision_is_ignored(svc, tmp_path):
    assert svc.decide("nosuch", "accept") is False
    info = svc.run({"cmd": "echo once", "unsandboxed_ok": True})  # approved: not held
    assert info["status"] == "running" and not asked(svc, info["id"])
    await result_of(svc, info["id"])
    assert svc.decide(info["id"], "accept") is False  # not held: nothing to start again
    held = svc.run({"cmd": "echo twice"})
    assert svc.decide(held["id"], "cancel") is True
    assert svc.decide(held["id"], "accept") is False  # too late: it was cancelled
    with pytest.raises(UsageError):
        svc.decide(held["id"], "maybe")


async def test_kill_of_a_held_run_cancels_it(svc):
    info = svc.run({"cmd": "echo never"})
    r = (await svc.mgr.kill(info["id"])).to_wire()
    assert r["status"] == "cancelled" and r["already_ended"] is True
    assert svc.decide(info["id"], "accept") is False


async def test_ask_always_holds(svc):
    info = svc.run({"cmd": "echo hi", "ask": True, "unsandboxed_ok": False})
    assert info["status"] == "awaiting_approval" and asked(svc, info["id"])[0]["answer"]["ask"]


async def test_unknown_run_option_is_refused(svc):
    with pytest.raises(UsageError, match="unknown run option"):
        svc.run({"cmd": "echo", "approve": True})


async def test_safe_sandboxed_command_runs_at_once_and_is_audited(svc, tmp_path):
    avail = get_backend("sandlock", parse_config({})).availability()
    if not avail.ok:
        pytest.skip(f"sandlock unavailable: {avail.reason}")
    svc.setup({"sandbox": {"backend": "sandlock"}})
    info = svc.run({"cmd": "echo safe", "cwd": str(tmp_path)})
    assert info["status"] == "running" and not asked(svc, info["id"])
    r = await result_of(svc, info["id"])
    assert r["output"] == "safe\n" and r["sandboxed"] is True
    records = [json.loads(x) for x in _lines(svc.audit_path)]
    assert any(x["event"] == "decision" and x["decided_by"] == "auto" for x in records)
    # A paused command is held even inside the sandbox.
    held = svc.run({"cmd": "git push --force", "cwd": str(tmp_path)})
    assert held["status"] == "awaiting_approval"
    assert asked(svc, held["id"])[0]["answer"]["sandboxed"] is True


@pytest.mark.parametrize(
    "spec",
    [
        {"approved": "no"},
        {"approved": 1},
        {"skip_sandbox": True, "unsandboxed_ok": "false"},
        {"skip_sandbox": "true"},
        {"live": "yes"},
        {"ask": 0},
    ],
    ids=str,
)
async def test_string_typed_consent_flags_are_one_error_and_nothing_runs(svc, tmp_path, spec):
    victim = tmp_path / "victim"
    victim.mkdir()
    name = next(iter(k for k in spec if not isinstance(spec[k], bool)))
    with pytest.raises(UsageError, match=f"`{name}` should be true or false"):
        svc.run({"cmd": f"rm -rf {victim}", "cwd": str(tmp_path), **spec})
    assert svc.sessions() == [] and not asked_any(svc)
    assert victim.exists()
    # Control: the same run with real booleans is held for the user.
    fixed = {k: v if isinstance(v, bool) else False for k, v in spec.items()}
    info = svc.run({"cmd": f"rm -rf {victim}", "cwd": str(tmp_path), **fixed})
    assert info["status"] == "awaiting_approval"


def asked_any(svc):
    return [p for n, p in svc.events if n == "approve"]


async def test_caller_approved_runs_get_a_decision_line(svc, tmp_path):
    info = svc.run({"cmd": "echo ok", "cwd": str(tmp_path), "unsandboxed_ok": True})
    await result_of(svc, info["id"])
    records = [json.loads(x) for x in _lines(svc.audit_path)]
    [line] = [x for x in records if x["event"] == "decision"]
    assert line["decided_by"] == "user_accept" and line["session_id"] == info["id"]
    [run] = [x for x in records if x["event"] == "run"]
    assert run["id"] == info["id"] and run["status"] == "exited"


async def test_approved_without_unsandboxed_ok_does_not_run_unconfined(svc, tmp_path):
    with pytest.raises(UsageError, match="would run WITHOUT a sandbox"):
        svc.run({"cmd": "echo x", "cwd": str(tmp_path), "approved": True})
    assert svc.sessions() == []


async def test_a_run_starts_on_the_answer_it_was_shown(svc, tmp_path):
    answer = svc.check("echo shown", {"cwd": str(tmp_path)})
    assert answer["needs_approval"] is True and answer["decision_id"]
    with pytest.raises(UsageError, match="was given for another command"):
        svc.run({"cmd": "echo other", "decision_id": answer["decision_id"], "unsandboxed_ok": True})
    info = svc.run(
        {"cmd": "echo shown", "decision_id": answer["decision_id"], "unsandboxed_ok": True}
    )
    assert info["id"] == answer["decision_id"]
    r = await result_of(svc, info["id"])
    assert r["output"] == "shown\n"
    with pytest.raises(UsageError, match="unknown or was used already"):
        svc.run({"cmd": "echo shown", "decision_id": answer["decision_id"], "unsandboxed_ok": True})
