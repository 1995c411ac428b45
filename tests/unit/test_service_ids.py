"""``run`` with the id the caller chose (Lua queues runs asked for while the host starts and gives
each its id then): the run gets exactly that id; a malformed or taken one is refused and nothing
starts."""

from __future__ import annotations

import asyncio

import pytest

from run_bash.errors import UsageError


async def result_of(svc, sid):
    return (await asyncio.wait_for(svc.mgr.wait_result(sid), 20)).to_wire()


async def test_a_run_gets_the_id_its_caller_chose(svc, tmp_path):
    info = svc.run(
        {"cmd": "echo mine", "unsandboxed_ok": True, "id": "q1w2e3", "cwd": str(tmp_path)}
    )
    assert info["id"] == "q1w2e3"
    r = await result_of(svc, "q1w2e3")
    assert r["id"] == "q1w2e3" and r["output"] == "mine\n"
    assert [p["id"] for n, p in svc.events if n == "result"] == ["q1w2e3"]


async def test_a_held_run_keeps_the_chosen_id(svc, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    info = svc.run({"cmd": f"rm -rf {victim}", "id": "held01"})
    assert info["id"] == "held01" and info["status"] == "awaiting_approval"
    assert [p["id"] for n, p in svc.events if n == "approve"] == ["held01"]
    assert svc.decide("held01", "accept") is True
    assert (await result_of(svc, "held01"))["exit_code"] == 0 and not victim.exists()


async def test_an_id_in_use_is_refused_and_nothing_starts(svc, tmp_path):
    marker = tmp_path / "marker"
    svc.run({"cmd": "sleep 5", "unsandboxed_ok": True, "id": "taken1", "bg_after": 0.2})
    checked = svc.check("true")["decision_id"]  # an answer the gate keeps holds its id too
    for sid in ("taken1", checked):
        with pytest.raises(UsageError, match="is taken"):
            svc.run({"cmd": f"touch {marker}", "unsandboxed_ok": True, "id": sid})
    await asyncio.sleep(0.2)
    assert not marker.exists() and set(svc.mgr.sessions) == {"taken1"}


@pytest.mark.parametrize("bad", ["ABC123", "abc", "a" * 17, "../x/y", "abc-12", 123456, ""])
async def test_a_malformed_id_is_refused(svc, tmp_path, bad):
    marker = tmp_path / "marker"
    with pytest.raises(UsageError, match="`id`"):
        svc.run({"cmd": f"touch {marker}", "unsandboxed_ok": True, "id": bad})
    await asyncio.sleep(0.1)
    assert not marker.exists() and not svc.mgr.sessions
