"""Unit-test fixtures shared by several files."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from run_bash.changes import store as change_store
from run_bash.sandbox import bwprobe
from run_bash.service import Service


@pytest.fixture(autouse=True)
def _close_change_stores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every ChangeStore a test made: each holds inotify instances, and the user's limit
    (fs.inotify.max_user_instances, 128 by default) is shared with every other process."""
    made: list[Any] = []
    init = change_store.ChangeStore.__init__

    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(change_store.ChangeStore, "__init__", tracked)
    yield
    for s in made:
        s.close()


@pytest.fixture
async def svc(tmp_path: Any) -> AsyncIterator[Service]:
    """A host service on the none backend that records its events (``svc.events``) and writes
    its audit log to ``svc.audit_path``. Files that need another service define their own."""
    events: list[tuple[str, dict[str, Any]]] = []
    audit = tmp_path / "audit.jsonl"
    service = Service(
        asyncio.get_running_loop(),
        lambda name, payload: events.append((name, payload)),
        environ={**os.environ, "RUN_BASH_AUDIT": str(audit)},
        state_dir=str(tmp_path / "state"),
    )
    os.makedirs(service.mgr.state_dir, mode=0o700, exist_ok=True)
    service.setup({"sandbox": {"backend": "none"}})
    service.events = events  # type: ignore[attr-defined]
    service.audit_path = audit  # type: ignore[attr-defined]
    yield service
    await service.mgr.shutdown()


@pytest.fixture
async def clean_svc(tmp_path: Any) -> AsyncIterator[Service]:
    """A host service on the none backend in a clean environment: ``PATH`` alone, and ``HOME``
    the test's directory (no configuration of the user's reaches the git it asks)."""
    service = Service(
        asyncio.get_running_loop(),
        lambda _n, _p: None,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        state_dir=str(tmp_path / "state"),
    )
    service.setup({"sandbox": {"backend": "none"}})
    yield service
    await service.mgr.shutdown()


@pytest.fixture
def made_probes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every bubblewrap probe made while the test runs (``bwprobe.Probe``, still the real one),
    in order; nothing probed or started before it."""
    monkeypatch.setattr(bwprobe, "FOUND", {})
    monkeypatch.setattr(bwprobe, "STARTED", {})
    monkeypatch.setattr(bwprobe, "READ", {})
    made: list[Any] = []
    real = bwprobe.Probe

    def probe(bwrap: str) -> Any:
        made.append(real(bwrap))
        return made[-1]

    monkeypatch.setattr(bwprobe, "Probe", probe)
    return made
