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
    launcher().begin()
    avail = Sandlock(parse_config({{}})).availability()
    print(json.dumps({{"ok": avail.ok, "reason": avail.reason, "version": avail.version,
                      "host_imported": "sandlock" in sys.modules and sys.modules["sandlock"] is not None}}))
    """
)


def check(hide: bool) -> dict:
    code = SCRIPT.format(python=str(ROOT / "python"), hide=hide)
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
