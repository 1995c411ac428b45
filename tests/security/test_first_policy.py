"""#23: a host's first prepared sandbox in a directory is made from the policy the last host's
first run there got (``sessions/lastpolicy.py``), and a run takes it only when its own policy
plans exactly that sandbox: a forged or stale entry costs the prepared sandbox, never a run's
confinement.

Through ``SessionManager`` under every confining backend, one manager per host. Each "not taken"
check has beside it a manager that took the sandbox made from the true entry, so a guess that is
never used cannot pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_bash.sandbox.probekept import write_own
from run_bash.sessions import lastpolicy
from tests.conftest import wait_for
from tests.security.conftest import Runner


@pytest.fixture
def kept(world, monkeypatch) -> Path:
    """Where the hosts of this test keep their first runs' policies (as Lua names it)."""
    path = world.home.parent / "state-kept" / "first-policies.json"
    monkeypatch.setitem(world.env, lastpolicy.FILE_ENV, str(path))
    return path


def next_host(sbx: Runner) -> Runner:
    """A new host (its own manager) with the suite's backend and preparation on."""
    return sbx.with_config(sandbox={"prepare": True})


def first_run(host: Runner, world, cmd: str):
    """What a host does at its start (``Service.setup``: the sandbox of its directory made ahead),
    then its first run there: (result, session)."""
    host.mgr.prepare_for(str(world.project))
    assert host.mgr.spares.settle(30)
    s = host.start(cmd)
    return host.wait(s), s


def noted(sbx: Runner, world, kept: Path) -> dict:
    """A first host's first run, whose policy it keeps: the entry of the project."""
    first = next_host(sbx)
    r, s = first_run(first, world, "true")
    assert r.exit_code == 0 and "took_spare" in s.marks  # made from its own computed policy
    assert first.mgr.spares.guessed == 0
    wait_for(kept.exists)
    entries = json.loads(kept.read_text())["dirs"]
    assert [cwd for cwd, _ in entries] == [str(world.project)]
    return entries[0][1]


def forge(kept: Path, world, change) -> None:
    data = json.loads(kept.read_text())
    change(data["dirs"][0][1])
    write_own(str(kept), json.dumps(data).encode())


def test_the_next_hosts_first_sandbox_is_made_from_the_kept_policy_and_taken(sbx, world, kept):
    noted(sbx, world, kept)
    host = next_host(sbx)
    r, s = first_run(host, world, "echo made > inside; cat README")
    assert host.mgr.spares.guessed == 1
    assert "took_spare" in s.marks, r.output
    assert r.exit_code == 0 and "hello" in r.output
    assert (world.project / "inside").read_text() == "made\n"


def test_a_forged_kept_policy_makes_a_sandbox_no_run_takes(sbx, world, kept):
    """The entry is made to grant the whole home directory: the sandbox made from it is thrown
    away, and the first run cannot write outside the project. Beside it, a host that finds the
    true entry takes its sandbox."""
    true_entry = noted(sbx, world, kept)
    forge(kept, world, lambda e: e["writable"].append(str(world.home)))
    forged = next_host(sbx)
    r, s = first_run(forged, world, f"echo x > {world.home}/forged; echo ok > inside")
    assert forged.mgr.spares.guessed == 1  # it was made, from the forged entry
    assert "took_spare" not in s.marks
    assert forged.mgr.spares.discarded == 1
    assert not (world.home / "forged").exists()
    assert (world.project / "inside").read_text() == "ok\n"  # the run itself ran
    forge(kept, world, lambda e: e.update(true_entry))
    control = next_host(sbx)
    r, s = first_run(control, world, "true")
    assert r.exit_code == 0 and control.mgr.spares.guessed == 1 and "took_spare" in s.marks


def test_a_kept_policy_that_warns_otherwise_is_not_taken(sbx, world, kept):
    """The same sandbox, but the kept policy's warnings are not the run's: the run would be told
    what its own policy does not say, so it does not take it (and is not told)."""
    noted(sbx, world, kept)
    forge(kept, world, lambda e: e["warnings"].append("forged warning"))
    host = next_host(sbx)
    r, s = first_run(host, world, "true")
    assert host.mgr.spares.guessed == 1
    assert "took_spare" not in s.marks
    assert host.mgr.spares.discarded == 1
    assert "forged warning" not in " ".join(r.notices)


def test_a_sandbox_made_for_another_project_goes_at_the_first_run(sbx, world, kept):
    """The kept entry names another project (the home directory): the sandbox made from it would
    never be taken (prepared sandboxes are kept by project), so the first run throws it away
    and starts as usual."""
    noted(sbx, world, kept)
    forge(kept, world, lambda e: e.update(project=str(world.home)))
    host = next_host(sbx)
    r, s = first_run(host, world, "echo ok > inside")
    assert host.mgr.spares.guessed == 1
    assert "took_spare" not in s.marks
    assert host.mgr.spares.discarded == 1
    assert r.exit_code == 0 and (world.project / "inside").read_text() == "ok\n"
