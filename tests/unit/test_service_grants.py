"""What a sandboxed run may write by the rules (``Service._grants``, asked by every recorded
run's snapshot) is kept per directory while the paths computing it looked at read the same, and
computed again when one changes or the options do. Counted through the real ``writable_grants``:
the kept answer has its own use beside each "computed again"."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from run_bash import fsdeps
from run_bash.sandbox import policy
from run_bash.service import Service


@pytest.fixture
async def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # fresh test files count as settled
    calls: list[str] = []
    real = policy.writable_grants

    def writable_grants(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(policy, "writable_grants", writable_grants)
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    service = Service(
        asyncio.get_running_loop(),
        lambda *_: None,
        environ={**os.environ, "HOME": str(home)},
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    service.setup({"sandbox": {"backend": "none", "rules": {"fs_writable": [".", "~/cache"]}}})
    yield service, home, proj, calls
    await service.mgr.shutdown()


async def test_grants_are_kept_until_a_path_they_looked_at_changes(counted):
    service, home, proj, calls = counted
    assert service._grants(str(proj)) == ([str(proj)], [])  # ~/cache is not there
    assert service._grants(str(proj)) == ([str(proj)], [])
    assert len(calls) == 1  # kept
    (home / "cache").mkdir()
    assert service._grants(str(proj)) == ([str(proj), str(home / "cache")], [])
    assert len(calls) == 2


async def test_new_options_compute_the_grants_again(counted):
    service, home, proj, calls = counted
    (home / "cache").mkdir()
    assert service._grants(str(proj)) == ([str(proj), str(home / "cache")], [])
    assert service._grants(str(proj))[0] == [str(proj), str(home / "cache")]
    assert len(calls) == 1  # kept
    service.setup({"sandbox": {"backend": "none", "rules": {"fs_writable": ["."]}}})
    assert service._grants(str(proj)) == ([str(proj)], [])
    assert len(calls) == 2
