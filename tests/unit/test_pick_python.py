"""``scripts/pick-python``: the interpreter ``make deps`` builds the venv from, and the health
report's note on an interpreter that runs from a shared libpython."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from run_bash import health

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "scripts" / "pick-python"
PROBE = "import sys; print(any('libpython' in l for l in open('/proc/self/maps')), sys.version_info >= (3, 10))"


def _shared(python: str) -> bool | None:
    """Whether ``python`` maps a libpython (None: it does not run, or is older than 3.10)."""
    try:
        out = subprocess.run(
            [python, "-I", "-c", PROBE], capture_output=True, text=True, timeout=30
        ).stdout.split()
    except OSError:
        return None
    if out != [] and out[1] == "True":
        return out[0] == "True"
    return None


def _pick(path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(PICK)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": path, "HOME": os.environ.get("HOME", "/"), **env},
    )


def test_a_named_interpreter_is_taken_as_it_is():
    got = _pick(os.environ["PATH"], SYS_PYTHON="/opt/my/python3")
    assert (got.returncode, got.stdout) == (0, "/opt/my/python3\n")


def test_the_pick_is_a_python_that_makes_venvs():
    got = _pick(os.environ["PATH"])
    assert got.returncode == 0, got.stderr
    picked = got.stdout.strip()
    assert _shared(picked) is not None  # it runs, and is 3.10 or newer
    ok = subprocess.run([picked, "-I", "-c", "import venv, ensurepip"], timeout=60)
    assert ok.returncode == 0


def test_a_statically_linked_python_wins_over_a_shared_one_first_on_path(tmp_path):
    shared = sys.executable if _shared(sys.executable) else None
    if shared is None:
        # Another interpreter of this machine that loads libpython (pyenv's builds do).
        for cand in sorted(Path("/root/.pyenv/versions").glob("3.1[0-9]*/bin/python3")):
            if _shared(str(cand)):
                shared = str(cand)
                break
    if shared is None or _shared("/usr/bin/python3") is not False:
        pytest.skip("needs a Python that loads libpython and a static /usr/bin/python3")
    first = tmp_path / "bin"
    first.mkdir()
    (first / "python3").symlink_to(shared)
    got = _pick(f"{first}:/usr/bin:/bin")
    assert got.returncode == 0, got.stderr
    picked = got.stdout.strip()
    assert _shared(picked) is False
    # Control: the shared one came first and qualified (3.10+, makes venvs), so it lost on the
    # libpython alone.
    assert picked != shared and _shared(shared) is True
    assert (
        subprocess.run([shared, "-I", "-c", "import venv, ensurepip"], timeout=60).returncode == 0
    )


def test_a_python_that_does_not_run_is_passed_over(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    broken = bindir / "python3"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    got = _pick(str(bindir))
    if got.returncode == 1:  # no absolute candidate on this machine either
        assert got.stdout == ""
    else:
        assert got.returncode == 0 and got.stdout.strip() != str(broken)
        assert _shared(got.stdout.strip()) is not None


def test_health_says_when_the_host_runs_from_a_shared_libpython():
    shared = health.libpython_shared()
    assert shared == bool(_shared(sys.executable))
