"""bubblewrap's probe (``bwprobe.py``), its commands started together: what it finds, kept once
found, and why bwrap cannot work when it cannot."""

from __future__ import annotations

import os
import shutil

import pytest

from run_bash.sandbox import bwprobe


@pytest.fixture
def fresh(monkeypatch):
    """Nothing probed yet; RUN_BASH_BWRAP as the test sets it."""
    monkeypatch.setattr(bwprobe, "FOUND", {})
    monkeypatch.setattr(bwprobe, "STARTED", {})
    bwprobe.bwrap_path.cache_clear()
    yield monkeypatch
    bwprobe.bwrap_path.cache_clear()


def test_the_probe_finds_a_working_bwrap_once_and_leaves_no_temp_dir(fresh, made_probes):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    found = bwprobe.result()
    avail, mode, _note = found
    ok, why, version = avail.ok, avail.reason, avail.version
    assert ok and why == "" and version.startswith("bubblewrap"), found
    assert mode in ("capped", "plain"), found  # the run's pid namespace works here
    assert bwprobe.result() is found and len(made_probes) == 1  # kept: probed once
    # The pid probe's temp dir is gone.
    assert made_probes[0].dir and not os.path.exists(made_probes[0].dir)


def test_a_probe_started_ahead_is_the_one_the_answer_takes(fresh, made_probes):
    """``start`` (the host, before its checker loads) begins the probe without waiting; the
    answer waits for that probe, not a new one, and it leaves nothing running."""
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    bwprobe.start()
    bwprobe.start()  # once per set of programs
    assert len(made_probes) == 1 and not bwprobe.FOUND
    running = made_probes[0].version
    assert not isinstance(running, str) and running.returncode is None  # started, not waited for
    avail, mode, _note = bwprobe.result()
    assert avail.ok and mode in ("capped", "plain"), avail
    assert len(made_probes) == 1 and not bwprobe.STARTED  # taken, not probed again
    assert not isinstance(running, str) and running.returncode == 0  # waited for
    assert made_probes[0].dir and not os.path.exists(made_probes[0].dir)
    bwprobe.start()  # already found: nothing started
    assert len(made_probes) == 1 and not bwprobe.STARTED


def test_nothing_is_started_ahead_without_bwrap(fresh):
    fresh.setenv("RUN_BASH_BWRAP", "")
    bwprobe.bwrap_path.cache_clear()
    bwprobe.start()
    assert not bwprobe.STARTED
    assert bwprobe.result()[0].reason == "bwrap not found"


def test_a_bwrap_that_cannot_make_namespaces_is_unavailable_with_its_words(fresh, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo "bubblewrap 9"; exit 0; }\n'
        'echo "bwrap: No permissions to create a new namespace" >&2; exit 1\n'
    )
    fake.chmod(0o755)
    fresh.setenv("RUN_BASH_BWRAP", str(fake))
    bwprobe.bwrap_path.cache_clear()
    avail, mode, _note = bwprobe.result()
    ok, why, advice, version = avail.ok, avail.reason, avail.advice, avail.version
    assert not ok and mode == ""
    assert why == "bwrap cannot create namespaces: bwrap: No permissions to create a new namespace"
    assert "unprivileged user namespaces" in advice and version == "bubblewrap 9"


def test_no_bwrap_is_unavailable(fresh):
    fresh.setenv("RUN_BASH_BWRAP", "")
    bwprobe.bwrap_path.cache_clear()
    avail, _mode, _note = bwprobe.result()
    ok, why, advice = avail.ok, avail.reason, avail.advice
    assert (ok, why) == (False, "bwrap not found") and "install bubblewrap" in advice


def test_a_filter_that_cannot_be_made_makes_bwrap_unavailable(fresh, monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    from run_bash.sandbox import seccomp

    def no_memfd() -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(seccomp, "program_fd", no_memfd)
    avail, mode, _note = bwprobe.result()
    # Runs could not install it either: bwrap is not used (the control: the first test here).
    assert not avail.ok and mode == "", avail
    assert "cannot make the seccomp filter: [Errno 38] Function not implemented" in avail.reason
