"""The guard's watches are planned once per project while nothing they depend on changes
(``Watcher._planned``): which kept names exist, which directories on their way are there. A run
after a kept plan is stopped by the same events; a directory made between runs (so a kept name's
watch belongs inside it now) plans again.

The real ``Keeper``, its watcher thread and the kernel's inotify; each "it was stopped" has the
kept plan's own use beside it (``_plans``), so a plan that was never kept cannot pass."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from run_bash import fsdeps
from run_bash.sandbox.guard import Keeper


@pytest.fixture
def guarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # fresh test files count as settled
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    keeper = Keeper(str(tmp_path / "q"))
    hr = keeper.discovery.discover(str(proj), writable=[str(proj)], env=env, home=str(tmp_path))
    try:
        yield keeper, proj, hr
    finally:
        keeper.shutdown()


def run(keeper: Keeper, hr, sid: str) -> tuple[threading.Event, object]:
    """Start run ``sid``'s guard; the event is set when the guard stops the run."""
    scope = keeper.prepare(sid, hr)
    killed = threading.Event()
    scope.attach(killed.set)
    return killed, keeper._plans[id(hr)][2]


def test_a_kept_plan_serves_the_next_run_and_still_stops_it(guarded):
    keeper, proj, hr = guarded
    kept = proj / ".nvim.lua"
    assert str(kept) in hr.members
    _killed, first = run(keeper, hr, "a")
    assert not keeper.finish("a")
    killed, second = run(keeper, hr, "b")
    assert second is first  # nothing changed: the same plan
    assert not killed.is_set()
    kept.write_text("vim.cmd('!id')\n")
    assert killed.wait(30), "a kept file made during a run did not stop it"
    notices = keeper.finish("b")
    assert any(".nvim.lua" in n for n in notices), notices
    assert not kept.exists()  # quarantined


def test_a_directory_made_between_runs_plans_again(guarded):
    keeper, proj, hr = guarded
    member = proj / ".config" / "lefthook.yml"
    assert str(member) in hr.members
    _killed, before = run(keeper, hr, "a")  # no .config: its names are watched from the top
    assert not keeper.finish("a")
    (proj / ".config").mkdir()
    killed, after = run(keeper, hr, "b")
    assert after is not before  # what the plan read changed: planned again
    assert not killed.is_set()
    member.write_text("pre-commit:\n  commands: {x: {run: id}}\n")
    assert killed.wait(30), "a kept file made in a new directory during a run did not stop it"
    keeper.finish("b")
    assert not member.exists()
