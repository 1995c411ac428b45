"""``python -m run_bash sandbox`` keeps the plugin's lifetime guarantees (#12 item 7): what a run
started (``setsid``, a double fork) dies after the command line's timeout and after a SIGKILL of the
command line itself, for every backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from run_bash.config import parse_config
from run_bash.sandbox.base import BACKEND_NAMES, get_backend
from tests.conftest import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]
# Three escapes from the command's process tree and group, then a wait.
ESCAPES = (
    "setsid sleep 601 & (sleep 602 &); nohup sleep 603 >/dev/null 2>&1 & echo ready; sleep 604"
)


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    avail = get_backend(request.param, parse_config({})).availability()
    if not avail.ok:
        pytest.skip(f"{request.param} unavailable: {avail.reason}")
    return request.param


def start_cli(tmp_path, backend, *extra):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    cli = subprocess.Popen(
        [sys.executable, "-m", "run_bash", "sandbox", "--backend", backend, *extra, "--", ESCAPES],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stdout.readline() == "ready\n"
    return cli


def run_processes(cli) -> list[int]:
    """Every process below the command line once the run's four sleeps exist."""

    def sleeps():
        procs = []
        for p in psutil.Process(cli.pid).children(recursive=True):
            try:
                procs.append((p.pid, p.name(), p.status()))
            except psutil.Error:
                continue
        return [pid for pid, name, st in procs if name == "sleep" and st != "zombie"]

    wait_for(lambda: len(sleeps()) >= 4, 10)
    return [p.pid for p in psutil.Process(cli.pid).children(recursive=True)]


def test_the_timeout_stops_everything_the_run_started(tmp_path, backend):
    t0 = time.monotonic()
    cli = start_cli(tmp_path, backend, "--timeout", "2")
    pids = run_processes(cli)
    rc = cli.wait(30)
    err = cli.stderr.read()
    cli.stdout.close()
    cli.stderr.close()
    assert rc == 124 and "timed out after 2 s" in err
    assert time.monotonic() - t0 < 15
    wait_for(lambda: not alive(pids), 8)


def test_a_sigkill_of_the_command_line_stops_everything_the_run_started(tmp_path, backend):
    cli = start_cli(tmp_path, backend)
    pids = run_processes(cli)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait(10)
    wait_for(lambda: not alive(pids), 10)
    cli.stdout.close()
    cli.stderr.close()
