"""The keeper's deferred work (``keep(..., later=)``): called once the worker has run for
``LATER_S``, or at once when the worker ends before that. Each case runs a real keeper and worker
in a child Python (``keep`` sweeps the descendants of the process that calls it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PY = str(Path(__file__).resolve().parents[2] / "python")

SCRIPT = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from run_bash import keeper
keeper.LATER_S = float(sys.argv[2])
marker, mode = sys.argv[3], sys.argv[4]
pid = os.fork()
if pid == 0:  # the worker
    if mode == "quick":
        os._exit(7)
    deadline = time.monotonic() + 10
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    os._exit(3 if os.path.exists(marker) else 4)
def later():
    with open(marker, "w") as f:
        f.write("done")
print(keeper.keep(pid, later=later))
"""


def keep(tmp_path: Path, later_s: float, mode: str) -> tuple[int, bool]:
    marker = tmp_path / "later"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, PY, str(later_s), str(marker), mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(out.stdout.strip()), marker.exists()


def test_later_runs_while_the_worker_lives_once_it_has_had_its_start(tmp_path):
    # The worker ends only when it sees what ``later`` wrote (4: it never came).
    assert keep(tmp_path, 0.05, "wait") == (3, True)


def test_later_runs_at_once_when_the_worker_ends_first(tmp_path):
    # LATER_S is far longer than the test may take: keep returns because the worker ended,
    # and ``later`` still ran (the control: the worker's own status comes back).
    assert keep(tmp_path, 600.0, "quick") == (7, True)
