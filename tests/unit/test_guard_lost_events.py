"""The guard when its event queue overflows: a run that makes names faster than the watcher reads
them loses the names, not its life. What the lost events could have said is read from the state
(``Keeper._changed_unseen``): a harmless flood goes on, a kept file made while the queue was full
stops the run all the same.

The watcher's own thread and a real kernel queue: the test holds the watcher's table while it
makes more names than ``fs.inotify.max_queued_events``, so the kernel drops the rest and queues
an overflow, as it does when a busy host reads too slowly."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from run_bash.sandbox.guard import Keeper

QUEUE = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


def until(cond, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


@pytest.fixture
def guarded(tmp_path: Path):
    proj = tmp_path / "proj"
    (proj / "bin").mkdir(parents=True)
    env = {"HOME": str(tmp_path), "PATH": f"{proj}/bin:/usr/bin:/bin"}
    keeper = Keeper(str(tmp_path / "q"))
    hr = keeper.discovery.discover(str(proj), writable=[str(proj)], env=env, home=str(tmp_path))
    assert str(proj / ".nvim.lua") in hr.members
    assert str(proj / "bin") in [pd.path for pd in hr.path_dirs]
    assert str(proj / "CLAUDE.md") in [r.path for r in hr.rules]
    scope = keeper.prepare("a", hr)
    killed = threading.Event()
    scope.attach(killed.set)
    try:
        yield keeper, proj, scope, killed
    finally:
        keeper.shutdown()


def flood(keeper: Keeper, proj: Path, then=None) -> None:
    """More names in the project's top than the queue holds, while the watcher cannot read;
    ``then`` runs while the queue is still full (its events are lost too)."""
    if QUEUE > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events is {QUEUE}: too many names to make")
    with keeper._table_lock:  # the watcher reads at most one batch, then waits here
        for i in range(QUEUE + 500):
            (proj / f"n{i}").touch()
        if then is not None:
            then()
    until(lambda: keeper.lost_events > 0)
    with keeper._lock:  # the watcher holds it while it compares: now it is done
        pass


def test_a_harmless_flood_that_overflows_the_queue_does_not_stop_the_run(guarded):
    keeper, proj, scope, killed = guarded
    flood(keeper, proj)
    assert keeper.lost_events >= 1  # the queue did overflow
    assert not scope.tripped and not killed.is_set(), scope.tripped
    # Events are read again after the overflow: a kept file made now stops the run (control).
    (proj / ".nvim.lua").write_text("os.exit(1)\n")
    assert killed.wait(30), "a kept file made after the overflow went unseen"
    assert scope.tripped


def test_a_kept_file_made_while_the_queue_was_full_stops_the_run(guarded):
    keeper, proj, scope, killed = guarded
    flood(keeper, proj, then=lambda: (proj / ".nvim.lua").write_text("os.exit(1)\n"))
    assert keeper.lost_events >= 1
    assert killed.wait(30), "a kept file made while events were lost went unseen"
    assert scope.tripped == "a file the host reads was changed", scope.tripped
    notes = keeper.finish("a")
    assert any(".nvim.lua" in n for n in notes), notes
    assert not (proj / ".nvim.lua").exists()


def test_a_git_directory_moved_while_the_queue_was_full_stops_the_run(guarded, tmp_path):
    keeper, proj, scope, killed = guarded
    keeper.finish("a")
    (proj / ".git").mkdir()
    (proj / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    hr = keeper.discovery.discover(
        str(proj),
        writable=[str(proj)],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        home=str(tmp_path),
    )
    assert str(proj / ".git") in hr.git_dirs
    scope = keeper.prepare("b", hr)
    killed = threading.Event()
    scope.attach(killed.set)

    def swap() -> None:
        (proj / ".git").rename(proj / "old")
        (proj / ".git").mkdir()

    flood(keeper, proj, then=swap)
    assert killed.wait(30), "a git directory swapped while events were lost went unseen"
    assert "was moved or replaced" in scope.tripped, scope.tripped


def test_a_program_put_on_path_while_the_queue_was_full_stops_the_run(guarded):
    keeper, proj, scope, killed = guarded

    def plant() -> None:
        (proj / "bin/git").write_text("#!/bin/sh\ntouch PWNED\n")
        (proj / "bin/git").chmod(0o755)

    flood(keeper, proj, then=plant)
    assert killed.wait(30), "a program put on PATH while events were lost went unseen"
    assert "git in" in scope.tripped and "(on PATH)" in scope.tripped, scope.tripped


def test_a_rules_file_written_while_the_queue_was_full_stops_the_run(guarded, tmp_path):
    keeper, proj, scope, killed = guarded
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh/id_rsa").write_text("secret\n")
    flood(keeper, proj, then=lambda: (proj / "CLAUDE.md").write_text("@~/.ssh/id_rsa\n"))
    assert killed.wait(30), "a rules file written while events were lost went unseen"
    assert "CLAUDE.md" in scope.tripped, scope.tripped


def test_a_failed_read_of_the_queue_counts_as_lost_events(guarded):
    """The events a failed read took with it are lost as in an overflow: the state is read."""
    keeper, proj, scope, killed = guarded
    ino = keeper._ino
    assert ino is not None
    real = ino.read
    failed = threading.Event()

    def read_then_fail():
        events = real()
        if not failed.is_set() and any(name == ".nvim.lua" for _wd, _mask, name in events):
            failed.set()
            raise OSError(5, "Input/output error")
        return events

    ino.read = read_then_fail  # type: ignore[method-assign]
    (proj / ".nvim.lua").write_text("os.exit(1)\n")
    assert failed.wait(30) and killed.wait(30), "events lost to a failed read went unseen"
    assert scope.tripped == "a file the host reads was changed", scope.tripped
    assert keeper.lost_events >= 1
