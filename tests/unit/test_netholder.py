"""The projects' network namespaces (``sandbox/netholder.py``): one per project, held while a run
of it lives, a bounded number kept idle. The kernel side (project B cannot reach project A's
server) is tests/security/test_project_loopback.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from run_bash.errors import SpawnError
from run_bash.sandbox.hostread import HostRead
from run_bash.sandbox.netholder import MAX_IDLE, Loopbacks, project_of
from run_bash.sandbox.policy import Limits, Policy

# What each descriptor a fake namespace was given is (a pipe of its own): a number closed and
# then reused by another thread of the test process (a worker an earlier test left) is not it.
_MADE: dict[int, tuple[int, int]] = {}


def fake_namespaces() -> tuple[Loopbacks, list[tuple[int, int]]]:
    made: list[tuple[int, int]] = []

    def make() -> tuple[int, int]:
        fds = fake_pair()
        made.append(fds)
        return fds

    return Loopbacks(make), made


def fake_pair() -> tuple[int, int]:
    """The two descriptors of a fake namespace, noted for ``is_open``."""
    fds = os.pipe2(os.O_CLOEXEC)
    for fd in fds:
        st = os.fstat(fd)
        _MADE[fd] = (st.st_dev, st.st_ino)
    return fds


def is_open(fd: int) -> bool:
    """Whether ``fd`` is still the descriptor a fake namespace was given."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return _MADE.get(fd) == (st.st_dev, st.st_ino)


def test_one_namespace_per_project_held_by_its_runs():
    loops, made = fake_namespaces()
    a1 = loops.acquire("/p/a", "s1")
    a2 = loops.acquire("/p/a", "s2")
    b = loops.acquire("/p/b", "s3")
    assert a1 is a2 and a1 is not b and len(made) == 2
    loops.release(a1, "s1")
    assert [x.key for x in loops.active()] == ["/p/a", "/p/b"]  # s2 still holds /p/a
    loops.release(a2, "s2")
    assert [x.key for x in loops.active()] == ["/p/b"]
    assert all(is_open(fd) for fd in a1.fds)  # idle, kept for the project's next run
    assert loops.acquire("/p/a", "s4") is a1 and len(made) == 2
    loops.close()
    assert not any(is_open(fd) for fds in made for fd in fds)


def test_idle_namespaces_beyond_the_bound_are_closed_oldest_first():
    loops, made = fake_namespaces()
    held = [loops.acquire(f"/p/{i}", f"s{i}") for i in range(MAX_IDLE + 2)]
    for i, lb in enumerate(held):
        loops.release(lb, f"s{i}")
    assert loops.projects() == [f"/p/{i}" for i in range(2, MAX_IDLE + 2)]
    for lb in held[:2]:
        with pytest.raises(SpawnError):
            lb.dup()
        assert not lb.holds(os.getpid())
    assert not any(is_open(fd) for fds in made[:2] for fd in fds)
    # A project whose namespace was closed gets a new one on its next run.
    again = loops.acquire("/p/0", "s9")
    assert again is not held[0] and len(made) == MAX_IDLE + 3
    loops.close()


def test_a_namespace_that_cannot_be_made_is_a_spawn_error():
    def fail() -> tuple[int, int]:
        raise SpawnError("user namespaces are not available")

    loops = Loopbacks(fail)
    with pytest.raises(SpawnError, match="not available"):
        loops.acquire("/p/a", "s1")
    assert loops.projects() == []


def test_the_first_projects_namespace_can_be_made_ahead_and_is_taken_once():
    """``make_ahead`` (a host's first sandbox: made while its policy is computed) makes one for
    whichever project first needs one; the next new project gets a new one. A process with one
    makes none ahead, and closing lets go of one made and never taken."""
    import threading

    loops, made = fake_namespaces()
    loops.make_ahead()
    loops.make_ahead()  # (one on its way already)
    a = loops.acquire("/p/a", "s1")
    assert a.fds == made[0] and len(made) == 1 and loops.made_ahead == 1
    b = loops.acquire("/p/b", "s2")
    assert b.fds == made[1] and loops.made_ahead == 1
    loops.make_ahead()  # namespaces are kept already: none is made
    assert len(made) == 2
    loops.close()
    other, made2 = fake_namespaces()
    other.make_ahead()
    for t in threading.enumerate():  # (made on a thread of its own)
        if t.name == "run_bash-netns":
            t.join(5)
    assert len(made2) == 1 and all(is_open(fd) for fd in made2[0])
    other.close()
    assert not any(is_open(fd) for fd in made2[0])  # made, never taken, let go


def test_a_project_that_comes_while_the_namespace_is_still_being_made_ahead_waits_for_it():
    """The run's ``acquire`` waits for the namespace being made ahead, holding the registry's
    lock; making it must not need that lock (it did, and the two waited for each other)."""
    import threading

    entered, release = threading.Event(), threading.Event()
    made: list[tuple[int, int]] = []

    def slow() -> tuple[int, int]:
        entered.set()
        assert release.wait(10)
        fds = (os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_RDONLY))
        made.append(fds)
        return fds

    loops = Loopbacks(slow)
    loops.make_ahead()
    assert entered.wait(10)
    timer = threading.Timer(0.05, release.set)  # (the run is waiting by then, most likely)
    timer.start()
    try:
        a = loops.acquire("/p/a", "s1")
        assert a.fds == made[0] and loops.made_ahead == 1
    finally:
        release.set()
        timer.cancel()
        loops.close()


def test_a_namespace_made_ahead_that_failed_is_made_again_when_needed():
    calls: list[int] = []

    def flaky() -> tuple[int, int]:
        calls.append(1)
        if len(calls) == 1:
            raise SpawnError("the launcher was busy")
        return fake_pair()

    loops = Loopbacks(flaky)
    loops.make_ahead()
    a = loops.acquire("/p/a", "s1")
    assert len(calls) == 2 and all(is_open(fd) for fd in a.fds) and loops.made_ahead == 0
    loops.close()


def policy_for(cwd: Path, roots: tuple[str, ...]) -> Policy:
    hr = HostRead(cwd=str(cwd), roots=roots, writable=(str(cwd),), denied=(), home="/home/u")
    return Policy(
        cwd=str(cwd),
        home="/home/u",
        readable=[],
        writable=[str(cwd)],
        denied=[],
        limits=Limits(1, 1, 1),
        host_read=hr,
    )


def test_the_project_is_the_work_tree_git_reports_else_the_working_directory(tmp_path):
    top = tmp_path / "repo"
    sub = top / "src" / "pkg"
    sub.mkdir(parents=True)
    assert project_of(policy_for(sub, (str(sub), str(top)))) == str(top.resolve())
    assert project_of(policy_for(top, (str(top),))) == str(top.resolve())
    plain = tmp_path / "notes"
    plain.mkdir()
    assert project_of(policy_for(plain, (str(plain),))) == str(plain.resolve())
    # A root that does not hold the working directory (a linked worktree's) is not the project.
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert project_of(policy_for(plain, (str(plain), str(other)))) == str(plain.resolve())
