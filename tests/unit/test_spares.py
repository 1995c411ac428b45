"""When the next command's sandbox is made beside a run that has just started
(``sessions/spares.py``: ``core_free``, read from the kernel's own counts)."""

from __future__ import annotations

import os
import subprocess
import sys

from run_bash.sessions.spares import CPU_PRESSURE_FREE, calm, room_beside

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = """
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
from run_bash.sessions.spares import core_free
os.sched_setaffinity(0, {int(sys.argv[2])})
print(core_free())
"""


def test_a_core_is_free_beside_the_command_only_with_two_cpus_and_few_runnable_threads():
    assert room_beside(2, 1) and room_beside(2, 2) and room_beside(8, 5)
    assert not room_beside(2, 3)  # a busy machine: made after the command, or once it ran a while
    assert not room_beside(1, 1)  # one CPU: it would take the command's core


def test_a_core_is_free_beside_the_command_only_with_two_cpus_and_little_cpu_pressure():
    assert calm(2, 0.0) and calm(4, CPU_PRESSURE_FREE - 0.5)
    assert not calm(2, CPU_PRESSURE_FREE)  # threads waited for a CPU: made later
    assert not calm(1, 0.0)


def test_a_process_on_one_cpu_reads_no_core_free():
    """``core_free`` counts the CPUs this process may use (its affinity), not the machine's."""
    cpu = min(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", PROBE, ROOT, str(cpu)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_only_a_run_that_came_back_to_back_has_the_next_sandbox_made_beside_it(tmp_path):
    import time

    from run_bash.config import parse_config
    from run_bash.sessions.spares import BURST_S, Spares
    from run_bash.sessions.tempspace import TempSpace

    def no_policy(cwd: str):
        raise AssertionError("no sandbox is made here")

    spares = Spares(lambda: parse_config({}), {}, TempSpace({}, str(tmp_path)), no_policy)
    try:
        now = time.monotonic()
        assert not spares.in_burst("/p", now)  # the first run of a directory
        spares.ended("/p")
        assert spares.in_burst("/p", time.monotonic())  # the next one came at once
        assert not spares.in_burst("/q", time.monotonic())  # another directory's first
        assert not spares.in_burst("/p", time.monotonic() + BURST_S + 1)  # after an agent's turn
    finally:
        spares.close()


def test_a_hosts_first_sandbox_reads_no_lease_list_until_a_command_started(tmp_path, monkeypatch):
    """Reading /proc/locks waits for the kernel (4-13 ms): before the host started any command
    no process of its own can hold a lease, so its first sandbox (which its first command waits
    for) does not read it. Control: once a command started, it is read."""
    import pytest

    from run_bash.config import parse_config
    from run_bash.sessions import spares as module
    from run_bash.sessions.tempspace import TempSpace

    reads: list[int] = []
    monkeypatch.setattr(module, "lease_holders", lambda: reads.append(1) or set())

    class Computed(Exception):
        pass

    def policy(cwd: str):
        raise Computed(cwd)  # the preparation got as far as the policy

    class Backend:
        def ready_ahead(self) -> None:
            pass

    spares = module.Spares(lambda: parse_config({}), {}, TempSpace({}, str(tmp_path)), policy)
    try:
        with pytest.raises(Computed):
            spares._make(str(tmp_path), Backend())  # type: ignore[arg-type]
        assert reads == []
        spares.commands += 1
        with pytest.raises(Computed):
            spares._make(str(tmp_path), Backend())  # type: ignore[arg-type]
        assert reads == [1]
    finally:
        spares.close()


def test_a_plan_not_armed_yet_is_the_same_only_while_every_path_it_read_is(tmp_path, monkeypatch):
    """A run that takes a spare before its plan is armed (back to back, or a host's first) has
    every path planning read looked at once (``Reads.look``): the same policy object, inputs and
    paths mean the same plan; a path that appeared, another policy or other inputs do not. The
    armed plan answers the same."""
    from run_bash import fsdeps
    from run_bash.sandbox.spare import Planned, planning

    monkeypatch.setattr(fsdeps, "SETTLED_NS", 0)  # made a moment ago: settled all the same
    d = tmp_path / "d"
    d.mkdir()
    (d / "kept").write_text("x")
    policy = object()

    def plan() -> tuple[bool, bool]:
        return os.path.lexists(d / "new"), os.path.isfile(d / "kept")

    out, planned = planning(policy, ("in",), plan)
    assert out == (False, True)
    assert isinstance(planned, Planned) and not planned.armed
    assert planned.same(policy, ("in",))  # the control: nothing changed
    assert not planned.same(object(), ("in",))
    assert not planned.same(policy, ("other",))
    (d / "new").write_text("")
    assert not planned.same(policy, ("in",))
    (d / "new").unlink()
    assert planned.same(policy, ("in",))
    (d / "kept").write_text("changed")
    assert not planned.same(policy, ("in",))
    (d / "kept").write_text("x")
    armed = planning(policy, ("in",), plan)[1]
    assert armed is not None and armed.arm() and armed.same(policy, ("in",))
    (d / "new").write_text("")
    assert not armed.same(policy, ("in",))
