"""``kill_and_wait``: what is left of an ended run is SIGKILLed and has exited when it returns (the
post-run check then reads nothing a run's in-flight write could still change)."""

from __future__ import annotations

import os
import subprocess

from run_bash.sandbox.base import kill_and_wait


def test_each_process_has_exited_when_it_returns():
    procs = [subprocess.Popen(["sleep", "300"]) for _ in range(3)]
    pids = [p.pid for p in procs]
    # The control: they are alive (not yet reapable) before.
    assert all(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in pids)
    assert kill_and_wait(lambda: pids)  # all of them exited within the wait
    for p in procs:
        got, status = os.waitpid(p.pid, os.WNOHANG)  # exited already: reaped without waiting
        assert got == p.pid and os.WIFSIGNALED(status), (got, status)
        p.returncode = -9


def test_a_pid_that_is_gone_is_skipped():
    kill_and_wait(lambda: [2**22 + 1])  # beyond the kernel's largest pid: never a process


def test_a_backends_own_process_is_killed_too_but_not_waited_for():
    p = subprocess.Popen(["sleep", "300"])
    kill_and_wait(lambda: [p.pid], unconfined=[p.pid])
    assert p.wait(timeout=30) == -9


def test_a_process_no_longer_listed_when_its_pidfd_is_open_is_not_signalled():
    """A pid read from the cgroup, then reused by another process, is signalled only if the
    cgroup still lists it once its pidfd is open; the listed one beside it is the control."""
    spared = subprocess.Popen(["sleep", "300"])
    killed = subprocess.Popen(["sleep", "300"])
    calls = iter([[spared.pid, killed.pid], [killed.pid]])
    try:
        assert kill_and_wait(lambda: next(calls))
        assert killed.wait(timeout=30) == -9
        assert spared.poll() is None  # not listed the second time: left alone
    finally:
        spared.kill()
        spared.wait()
