"""The sandbox launcher's fork server says what the backend check needs (sandlock's version, the
Landlock ABI, whether a run's namespace can be built): the host never imports sandlock. Each case
runs in a Python of its own, which has one thread, so its launcher is forked from it as the
host's is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT

SCRIPT = textwrap.dedent(
    """\
    import json, sys
    sys.path.insert(0, {python!r})
    if {hide}:
        sys.modules["sandlock"] = None  # the package cannot be imported (nor by the fork server)
    from run_bash.config import parse_config
    from run_bash.sandbox.launcher import launcher
    from run_bash.sandbox.sandlock import Sandlock
    from run_bash.sandbox import serverfork
    serverfork.begin_early({now})  # as the host's start does
    deferred = False
    if not {now}:  # what its ``ready`` said (the check below asks it for the facts)
        launcher().ensure()
        deferred = bool(launcher()._facts.get("deferred"))
    avail = Sandlock(parse_config({{}})).availability()
    out = {{"ok": avail.ok, "reason": avail.reason, "version": avail.version, "deferred": deferred,
           "host_imported": "sandlock" in sys.modules and sys.modules["sandlock"] is not None}}
    if {run} and avail.ok:  # a sandlock run through this fork server
        import asyncio, os, tempfile
        from run_bash.sessions import SessionManager
        loop = asyncio.new_event_loop()
        state = tempfile.mkdtemp()
        m = SessionManager(parse_config({{"sandbox": {{"backend": "sandlock", "prepare": False}}}}),
                           loop=loop, state_dir=state)
        s = m.start("echo confined-$RUN_BASH_SESSION", cwd=tempfile.mkdtemp())
        r = loop.run_until_complete(asyncio.wait_for(m.wait_result(s.id), 60))
        out["run"] = [r.exit_code, r.output, r.backend]
        loop.run_until_complete(m.shutdown())
    print(json.dumps(out))
    """
)


def check(hide: bool, now: bool = True, run: bool = False) -> dict:
    code = SCRIPT.format(python=str(ROOT / "python"), hide=hide, now=now, run=run)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_fork_server_tells_the_backend_check_what_sandlock_is_here():
    got = check(hide=False)
    if not got["ok"]:
        pytest.skip(f"sandlock unavailable here: {got['reason']}")
    assert got["version"].startswith("sandlock ") and "Landlock ABI" in got["version"], got
    assert not got["host_imported"], got  # the check never loaded sandlock in this process


def test_a_sandlock_that_cannot_be_imported_is_named_by_the_check():
    got = check(hide=True)
    assert not got["ok"], got
    assert "the sandlock Python package is not installed" in got["reason"], got


def test_a_fork_server_that_did_not_load_sandlock_answers_the_same_when_asked():
    """Started for a host whose options named bubblewrap, the fork server does not load
    sandlock (its CPU goes to the host's start); asked later (health, other options), it says
    what one that loaded it says, and a sandlock run through it works. The control: one that
    loaded it says so with ``ready``."""
    eager = check(hide=False)
    if not eager["ok"]:
        pytest.skip(f"sandlock unavailable here: {eager['reason']}")
    assert not eager["deferred"], eager
    later = check(hide=False, now=False, run=True)
    assert later["deferred"], "ready said nothing of sandlock"
    assert (later["ok"], later["version"]) == (True, eager["version"]), (later, eager)
    assert not later["host_imported"], later
    code, output, backend = later["run"]
    assert code == 0 and output.startswith("confined-") and backend == "sandlock", later


def test_a_sandlock_that_cannot_be_imported_is_named_when_asked_later():
    got = check(hide=True, now=False)
    assert got["deferred"] and not got["ok"], got
    assert "the sandlock Python package is not installed" in got["reason"], got
