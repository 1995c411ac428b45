"""run_bash's shared network namespace holder (#12 item 3): 100 host starts, each one's first
bubblewrap run works with the namespace's loopback up, and nothing a host started outlives it (no
holder, no ``sleep``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import get_backend

ROOT = Path(__file__).resolve().parents[2]
HOSTS = 100

pytestmark = pytest.mark.bwrap


def test_a_hundred_host_starts_each_first_bubblewrap_run_works_and_nothing_outlives_them():
    avail = get_backend("bubblewrap", parse_config({})).availability()
    if not avail.ok:
        pytest.skip(f"bubblewrap unavailable: {avail.reason}")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("hosts_driver.py")), str(HOSTS), "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    reports = data["reports"]
    assert len(reports) == HOSTS, out.stderr[-2000:]
    failed = [r for r in reports if r["output"] != "first-run-ok\n" or r["exit"] != 0]
    assert failed == [], failed[:5]
    # Every host's shared loopback worked (no run fell back to a private one).
    assert not [r for r in reports if any("network namespace" in n for n in r["notices"])]
    assert data["left"] == [], data["left"]
