"""``sandbox.backend = "auto"`` (the default) and strict explicit backends (#12 item 5), through the
runtime (``SessionManager``) and the service. A backend is made unavailable by giving its instance
the availability its probe would report on a machine without it."""

from __future__ import annotations

import asyncio
import os

import pytest

from run_bash.config import parse_config
from run_bash.errors import SpawnError
from run_bash.sandbox.base import (
    AUTO,
    CONFINING_BACKENDS,
    Availability,
    choose_backend,
    get_backend,
)
from run_bash.service import Service
from run_bash.sessions import SessionManager


def available(name: str) -> bool:
    return get_backend(name, parse_config({})).availability().ok


def break_backend(mgr: SessionManager, name: str, reason: str = "not on this machine") -> None:
    mgr.backend(name)._availability = Availability(False, reason, f"install {name}")  # type: ignore[attr-defined]


@pytest.fixture
async def make(tmp_path):
    made: list[SessionManager] = []

    def build(**raw) -> SessionManager:
        m = SessionManager(
            parse_config(raw),
            loop=asyncio.get_running_loop(),
            state_dir=str(tmp_path / f"state{len(made)}"),
        )
        os.makedirs(m.state_dir, mode=0o700)
        made.append(m)
        return m

    yield build
    for m in made:
        await m.shutdown()


async def run(m: SessionManager, cmd: str, **kw):
    s = m.start(cmd, cwd=m.state_dir, **kw)
    return s, await asyncio.wait_for(m.wait_result(s.id), 60)


def test_auto_is_the_default_and_prefers_the_registry_order():
    cfg = parse_config({})
    assert cfg.sandbox.backend == AUTO
    names: list[str] = []

    def get(name):
        names.append(name)
        return get_backend(name, cfg)

    chosen = choose_backend(AUTO, get)
    first_ok = next(n for n in CONFINING_BACKENDS if get_backend(n, cfg).availability().ok)
    assert chosen.backend.name == first_ok
    assert chosen.reason.startswith(f"auto: {first_ok} works here (")
    assert names == list(CONFINING_BACKENDS[: CONFINING_BACKENDS.index(first_ok) + 1])


@pytest.mark.skipif(not available("bubblewrap"), reason="bubblewrap unavailable")
async def test_auto_falls_back_to_bubblewrap_and_runs_confined(make):
    m = make()
    break_backend(m, "sandlock", "Landlock ABI 0")
    s, r = await run(m, "echo confined; test -e /proc/1/environ && cat /proc/1/comm")
    assert s.backend.name == "bubblewrap" and r.sandboxed is True
    assert r.output.startswith("confined\n")
    assert "sandlock unavailable: Landlock ABI 0" in m.choice().reason


async def test_auto_with_no_working_sandbox_asks_for_every_command(make):
    m = make()
    for name in CONFINING_BACKENDS:
        break_backend(m, name, f"no {name} here")
    with pytest.raises(SpawnError, match="needs the user's approval"):
        m.start("echo x", cwd=m.state_dir)
    s, r = await run(m, "echo approved", unsandboxed_ok=True)
    assert s.backend.name == "none" and r.output == "approved\n"
    why = "no sandbox works here (sandlock unavailable: no sandlock here; bubblewrap unavailable: no bubblewrap here)"
    assert why in r.notices


@pytest.mark.parametrize("name", CONFINING_BACKENDS)
async def test_a_backend_named_explicitly_is_strict(make, name):
    if not available(name):
        pytest.skip(f"{name} unavailable")
    m = make(sandbox={"backend": name})
    break_backend(m, name, "broken for the test")
    # Never a silent fallback, not even to another sandbox, not even with consent to run unconfined.
    for kw in ({}, {"unsandboxed_ok": True}):
        with pytest.raises(SpawnError) as err:
            m.start("touch SHOULD_NOT_EXIST", cwd=m.state_dir, **kw)
        assert f'sandbox.backend = "{name}" is unavailable: broken for the test' in str(err.value)
        assert 'sandbox.backend = "auto"' in str(err.value)
    assert not os.path.exists(os.path.join(m.state_dir, "SHOULD_NOT_EXIST"))
    # The user can still run a command without the sandbox, explicitly (it asks).
    s, r = await run(m, "echo unconfined", skip_sandbox=True, unsandboxed_ok=True)
    assert s.backend.name == "none" and r.output == "unconfined\n"


async def test_setup_and_check_say_what_was_chosen_and_why(tmp_path, monkeypatch):
    svc = Service(
        asyncio.get_running_loop(),
        lambda _n, _p: None,
        environ={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        state_dir=str(tmp_path / "state"),
    )
    try:
        reply = svc.setup({})
        chosen = svc.mgr.choice()
        assert reply["backend"] == chosen.backend.name
        assert reply["chosen_because"] == chosen.reason and chosen.reason.startswith("auto:")
        assert "backend_error" not in reply
        assert svc.check("ls")["chosen_because"] == chosen.reason
        # A kernel without Landlock (the probe's answer there), sandlock named explicitly: setup
        # applies the config and says it is an error; checks refuse; skip_sandbox still works.
        from run_bash.sandbox.sandlock import Sandlock

        monkeypatch.setattr(
            Sandlock, "_probe", lambda self: Availability(False, "the kernel has no Landlock")
        )
        reply = svc.setup({"sandbox": {"backend": "sandlock"}})
        assert reply["backend_error"].startswith(
            'sandbox.backend = "sandlock" is unavailable: the kernel has no Landlock'
        )
        with pytest.raises(SpawnError, match="the kernel has no Landlock"):
            svc.check("ls")
        assert svc.check("ls", {"skip_sandbox": True})["backend"] == "none"
        # The same kernel with "auto": no error, the next backend that works (or none).
        reply = svc.setup({})
        assert "backend_error" not in reply and reply["backend"] != "sandlock"
        assert "sandlock unavailable: the kernel has no Landlock" in reply["chosen_because"]
    finally:
        await svc.mgr.shutdown()


def test_the_original_configs_keep_working():
    assert parse_config({"sandbox": {"enabled": False}}).sandbox.backend == "none"
    assert parse_config({"sandbox": {"backend": False}}).sandbox.backend == "none"
    legacy = parse_config({"sandbox": {"profile": "~/p.toml"}})
    assert legacy.sandbox.backend == AUTO
    assert legacy.sandbox.backends.sandlock.profile == "~/p.toml"
    for name in ("sandlock", "bubblewrap", "none"):
        assert parse_config({"sandbox": {"backend": name}}).sandbox.backend == name
