"""#23: a host's first prepared sandbox in a directory is made from the policy the last host's
first run there got (``sessions/lastpolicy.py``), and a run takes it only when its own policy
plans exactly that sandbox: a forged or stale entry costs the prepared sandbox, never a run's
confinement.

Through ``SessionManager`` under every confining backend, one manager per host, in both orders
a first run meets its sandbox in: "at once" (the run comes while the sandbox is being made, and
checks it when it takes it) and "later" (the sandbox was made a while before: the host computed
the policy a run gets then and checked the sandbox against it, ``Spares._confirm``). Each "not
taken" check has beside it a manager that took the sandbox made from the true entry, so a guess
that is never used cannot pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from run_bash.sessions import lastpolicy
from run_bash.statedir import write_own
from tests.conftest import wait_for
from tests.security.conftest import Runner

ORDERS = ["at_once", "later"]


@pytest.fixture
def kept(world, monkeypatch) -> Path:
    """Where the hosts of this test keep their first runs' policies (as Lua names it)."""
    path = world.home.parent / "state-kept" / "first-policies.json"
    monkeypatch.setitem(world.env, lastpolicy.FILE_ENV, str(path))
    return path


def next_host(sbx: Runner) -> Runner:
    """A new host (its own manager) with the suite's backend and preparation on."""
    return sbx.with_config(sandbox={"prepare": True})


def done(sbx: Runner, host: Runner) -> None:
    """The host exits (its inotify instances and processes go before the next one starts: the
    tests run beside each other, and instances are a per-user limit)."""
    sbx.derived.remove(host)
    host.close()


def first_run(host: Runner, world, cmd: str, order: str, monkeypatch):
    """What a host does at its start (``Service.setup``: the sandbox of its directory made
    ahead), then its first run there, in ``order``: (result, session)."""
    cwd = str(world.project)
    spares = host.mgr.spares
    if order == "at_once":  # the sandbox is made once the run waits for it
        build, calls = spares._build, []

        def held(*args):
            if not calls:  # (the first one: the next run's sandbox is made as usual)
                calls.append(args)
                wait_for(lambda: cwd in spares._awaited, timeout=30)
            return build(*args)

        monkeypatch.setattr(spares, "_build", held)
    host.mgr.prepare_for(cwd)
    if order == "later":
        assert spares.settle(30)
    s = host.start(cmd)
    r = host.wait(s)
    assert spares.settle(30)
    return r, s


def noted(sbx: Runner, world, kept: Path, monkeypatch) -> dict:
    """A first host's first run, whose policy it keeps: the entry of the project."""
    first = next_host(sbx)
    r, s = first_run(first, world, "true", "later", monkeypatch)
    assert r.exit_code == 0 and "took_spare" in s.marks  # made from its own computed policy
    assert first.mgr.spares.guessed == 0
    wait_for(kept.exists)
    entries = json.loads(kept.read_text())["dirs"]
    assert [cwd for cwd, _ in entries] == [str(world.project)]
    done(sbx, first)
    return entries[0][1]


def forge(kept: Path, change) -> None:
    data = json.loads(kept.read_text())
    change(data["dirs"][0][1])
    write_own(str(kept), json.dumps(data).encode())


@pytest.mark.parametrize("order", ORDERS)
def test_the_next_hosts_first_sandbox_is_made_from_the_kept_policy_and_taken(
    sbx, world, kept, monkeypatch, order
):
    noted(sbx, world, kept, monkeypatch)
    host = next_host(sbx)
    r, s = first_run(host, world, "echo made > inside; cat README", order, monkeypatch)
    assert host.mgr.spares.guessed == 1
    assert "took_spare" in s.marks and host.mgr.spares.discarded == 0, r.output
    assert r.exit_code == 0 and "hello" in r.output
    assert (world.project / "inside").read_text() == "made\n"


def control(sbx: Runner, world, kept: Path, true_entry: dict, order: str, monkeypatch) -> None:
    """Beside a "not taken" check: the true entry put back, the next host takes its sandbox."""
    forge(kept, lambda e: (e.clear(), e.update(true_entry)))
    host = next_host(sbx)
    r, s = first_run(host, world, "true", order, monkeypatch)
    assert r.exit_code == 0 and host.mgr.spares.guessed == 1 and "took_spare" in s.marks
    done(sbx, host)


def not_taken(host: Runner, s, order: str) -> None:
    """The sandbox made from the kept entry was thrown away, by the run ("at once": it then
    starts the usual way) or by the host's check before it ("later": the run takes the one
    made instead, from its own policy)."""
    assert host.mgr.spares.guessed == 1
    assert host.mgr.spares.discarded == 1
    assert ("took_spare" in s.marks) == (order == "later")


@pytest.mark.parametrize("order", ORDERS)
def test_a_forged_kept_policy_confines_no_run(sbx, world, kept, monkeypatch, order):
    """The entry is made to grant the whole home directory: the sandbox made from it is thrown
    away, and the first run cannot write outside the project. Beside it, a host that finds the
    true entry takes its sandbox."""
    true_entry = noted(sbx, world, kept, monkeypatch)
    forge(kept, lambda e: e["writable"].append(str(world.home)))
    forged = next_host(sbx)
    cmd = f"echo x > {world.home}/forged; echo ok > inside"
    r, s = first_run(forged, world, cmd, order, monkeypatch)
    not_taken(forged, s, order)
    assert not (world.home / "forged").exists()
    assert r.exit_code == 0 and (world.project / "inside").read_text() == "ok\n"  # it ran
    done(sbx, forged)
    control(sbx, world, kept, true_entry, order, monkeypatch)


@pytest.mark.parametrize("order", ORDERS)
def test_a_kept_policy_that_warns_otherwise_is_not_taken(sbx, world, kept, monkeypatch, order):
    """The same sandbox, but the kept policy's warnings are not the run's: the run would be told
    what its own policy does not say, so it does not get it (and is not told)."""
    true_entry = noted(sbx, world, kept, monkeypatch)
    forge(kept, lambda e: e["warnings"].append("forged warning"))
    host = next_host(sbx)
    r, s = first_run(host, world, "true", order, monkeypatch)
    not_taken(host, s, order)
    assert r.exit_code == 0 and "forged warning" not in " ".join(r.notices)
    done(sbx, host)
    control(sbx, world, kept, true_entry, order, monkeypatch)


@pytest.mark.parametrize("order", ORDERS)
def test_a_sandbox_made_for_another_project_goes(sbx, world, kept, monkeypatch, order):
    """The kept entry names another project (the home directory): the sandbox made from it would
    never be taken (prepared sandboxes are kept by project), so it goes."""
    true_entry = noted(sbx, world, kept, monkeypatch)
    forge(kept, lambda e: e.update(project=str(world.home)))
    host = next_host(sbx)
    r, s = first_run(host, world, "echo ok > inside", order, monkeypatch)
    not_taken(host, s, order)
    assert r.exit_code == 0 and (world.project / "inside").read_text() == "ok\n"
    done(sbx, host)
    control(sbx, world, kept, true_entry, order, monkeypatch)
