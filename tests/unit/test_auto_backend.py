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


async def test_auto_falls_back_to_the_next_backend_and_runs_confined(make):
    broken, other = CONFINING_BACKENDS
    if not available(other):
        pytest.skip(f"{other} unavailable")
    m = make()
    break_backend(m, broken, "not built for this kernel")
    s, r = await run(m, "echo confined; touch /usr/x 2>/dev/null || echo refused")
    assert s.backend.name == other and r.sandboxed is True
    assert r.output == "confined\nrefused\n", r.output
    assert f"{broken} unavailable: not built for this kernel" in m.choice().reason


# Options only sandlock enforces (bwrap cannot filter by port, and its runs have only their
# project's loopback), and options written for sandlock.
NEEDS_SANDLOCK = [
    {"network": {"allow": ["192.0.2.1:443"]}},
    {"network": {"allow_local_ports": [5432]}},
    {"backends": {"sandlock": {"extra_args": ["--max-processes", "64"]}}},
]


@pytest.mark.parametrize("sandbox", NEEDS_SANDLOCK, ids=["allow", "local_ports", "sandlock_args"])
async def test_auto_takes_sandlock_where_the_options_need_it(make, sandbox):
    if not (available("sandlock") and available("bubblewrap")):
        pytest.skip("needs both backends")
    # Control: the same machine with default options takes bubblewrap, the cheaper one.
    assert make().choice().backend.name == "bubblewrap"
    m = make(sandbox=sandbox)
    chosen = m.choice()
    assert chosen.backend.name == "sandlock", chosen.reason
    assert chosen.reason.startswith("auto: sandlock works here (")
    assert "; bubblewrap not taken: " in chosen.reason
    s, r = await run(m, "echo confined")
    assert s.backend.name == "sandlock" and r.sandboxed and r.output == "confined\n"


async def test_auto_takes_a_backend_that_falls_short_over_none_and_says_what_it_lacks(make):
    if not available("bubblewrap"):
        pytest.skip("bubblewrap unavailable")
    m = make(sandbox={"network": {"allow": ["192.0.2.1:443"]}})
    break_backend(m, "sandlock", "the kernel has no Landlock")
    chosen = m.choice()
    assert chosen.backend.name == "bubblewrap" and not chosen.unavailable
    assert chosen.reason.startswith("auto: bubblewrap works here (")
    assert " but cannot limit the network to sandbox.network.allow " in chosen.reason
    assert chosen.reason.endswith("; sandlock unavailable: the kernel has no Landlock")
    s, r = await run(m, "echo confined")
    assert s.backend.name == "bubblewrap" and r.sandboxed


async def test_auto_with_no_working_sandbox_asks_for_every_command(make):
    m = make()
    for name in CONFINING_BACKENDS:
        break_backend(m, name, f"no {name} here")
    with pytest.raises(SpawnError, match="needs the user's approval"):
        m.start("echo x", cwd=m.state_dir)
    s, r = await run(m, "echo approved", unsandboxed_ok=True)
    assert s.backend.name == "none" and r.output == "approved\n"
    said = "; ".join(f"{n} unavailable: no {n} here" for n in CONFINING_BACKENDS)
    assert f"no sandbox works here ({said})" in r.notices


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
        # The same kernel with "auto" and options only sandlock enforces: no error, the next
        # backend that works (or none), and why sandlock was not taken.
        reply = svc.setup({"sandbox": {"network": {"allow": ["192.0.2.1:443"]}}})
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


async def test_health_says_what_the_chosen_backend_lacks_here(make, monkeypatch):
    if not available("bubblewrap"):
        pytest.skip("bubblewrap unavailable")
    from run_bash import health
    from run_bash.sandbox import seccomp

    m = make(sandbox={"backend": "bubblewrap"})

    def warned() -> list[str]:
        return [i["msg"] for i in health.report(m.config, m) if i["level"] == "warn"]

    # Control: on this machine the filter exists, and health does not warn about it.
    assert not [t for t in warned() if "seccomp" in t]
    monkeypatch.setattr(seccomp, "program", lambda: None)  # an architecture without numbers
    said = [t for t in warned() if "no seccomp filter" in t]
    assert said and "io_uring, bpf, keyctl" in said[0], warned()


async def test_health_warns_of_relative_path_entries(make):
    from run_bash import health

    m = make(sandbox={"backend": "none"})

    def warned() -> list[str]:
        return [i["msg"] for i in health.report(m.config, m) if i["level"] == "warn"]

    m.environ["PATH"] = "/usr/bin:.:/bin"  # control: absolute entries and "." say nothing
    assert not [t for t in warned() if "relative entry" in t]
    m.environ["PATH"] = "node_modules/.bin:/usr/bin:bin"
    said = [t for t in warned() if "relative entry" in t]
    assert len(said) == 2 and "node_modules/.bin" in said[0] and "'bin'" in said[1], said
