"""``Service.preload`` (the host's way to ``ready``): bubblewrap's probe is started before the
checker loads when bubblewrap is the backend the check asks first (named, or first for
``auto``), never otherwise, and whatever the check chose, no probe is left running."""

from __future__ import annotations

import asyncio
import os

import pytest

from run_bash.sandbox import bwprobe
from run_bash.service import Service


@pytest.fixture
def probes(made_probes, monkeypatch):
    """Every probe made (``made_probes``), and every ``start``."""
    started: list[bool] = []
    real_start = bwprobe.start

    def start() -> None:
        started.append(True)
        real_start()

    monkeypatch.setattr(bwprobe, "start", start)
    return made_probes, started


@pytest.mark.parametrize(
    ("named", "ahead"),
    [("auto", True), ("bubblewrap", True), (None, True), ("sandlock", False), ("none", False)],
)
async def test_the_probe_starts_ahead_only_for_the_backend_asked_first(
    probes, tmp_path, named, ahead
):
    made, started = probes
    environ = {k: v for k, v in os.environ.items() if k != "RUN_BASH_BACKEND"}
    if named is not None:
        environ["RUN_BASH_BACKEND"] = named
    svc = Service(
        asyncio.get_running_loop(),
        lambda _name, _payload: None,
        environ={**environ, "HOME": str(tmp_path)},
        state_dir=str(tmp_path / "state"),
    )
    try:
        svc.preload(None)
        assert started == ([True] if ahead else [])
        assert not bwprobe.STARTED  # taken: nothing of it left running
        if ahead and bwprobe.bwrap_path() is not None:
            assert len(made) == 1 and made[0].version.returncode == 0  # one probe, waited for
            assert bwprobe.result() is next(iter(bwprobe.FOUND.values()))  # its answer is kept
        if not ahead:
            assert not made  # sandlock's and none's check never runs bwrap
    finally:
        await svc.mgr.shutdown()
