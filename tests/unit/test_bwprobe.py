"""bubblewrap's probe (``bwprobe.py``), its commands started together: what it finds, kept once
found, and why bwrap cannot work when it cannot."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from run_bash.sandbox import bwprobe, probekept


@pytest.fixture
def fresh(monkeypatch):
    """Nothing probed yet; RUN_BASH_BWRAP as the test sets it."""
    monkeypatch.setattr(bwprobe, "FOUND", {})
    monkeypatch.setattr(bwprobe, "STARTED", {})
    monkeypatch.setattr(bwprobe, "READ", {})
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


# -- the answer kept between hosts (``probekept``) ----------------------------------------------------


def a_new_host(monkeypatch):
    """What a host started later has: nothing found, read or started in this process."""
    monkeypatch.setattr(bwprobe, "FOUND", {})
    monkeypatch.setattr(bwprobe, "STARTED", {})
    monkeypatch.setattr(bwprobe, "READ", {})


@pytest.fixture
def kept_file(fresh, tmp_path):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    path = tmp_path / "state" / "bwrap-probe.json"
    fresh.setenv(probekept.FILE_ENV, str(path))
    return path


def test_a_working_answer_is_kept_and_a_later_host_takes_it_without_probing(
    kept_file, made_probes, monkeypatch
):
    first = bwprobe.result()
    assert first[0].ok and len(made_probes) == 1 and kept_file.exists()
    assert kept_file.stat().st_mode & 0o077 == 0  # the user's own
    a_new_host(monkeypatch)
    bwprobe.start()  # the host's start: nothing is started when the kept answer holds
    assert not bwprobe.STARTED
    again = bwprobe.result()
    assert len(made_probes) == 1, "no probe: the kept answer for the same state"
    assert again == first
    # The control: without the file, a new host probes.
    a_new_host(monkeypatch)
    kept_file.unlink()
    assert bwprobe.result() == first and len(made_probes) == 2


def test_a_different_bwrap_or_a_changed_system_is_probed_again(
    kept_file, made_probes, monkeypatch, tmp_path
):
    bwprobe.result()
    assert len(made_probes) == 1
    # Another file under another name (an upgrade, another install): probed.
    other = tmp_path / "bin" / "bwrap"
    other.parent.mkdir()
    shutil.copy2(shutil.which("bwrap"), other)
    monkeypatch.setenv("RUN_BASH_BWRAP", str(other))
    bwprobe.bwrap_path.cache_clear()
    a_new_host(monkeypatch)
    assert bwprobe.result()[0].ok and len(made_probes) == 2
    # The same name, the file changed (its times): probed.
    os.utime(other, ns=(1, 1))
    a_new_host(monkeypatch)
    assert bwprobe.result()[0].ok and len(made_probes) == 3
    # The same file, a setting namespaces depend on read otherwise: probed.
    real = probekept._read

    def limits_changed(path: str) -> str | None:
        text = real(path)
        return "0\n" if path.endswith("max_user_namespaces") else text

    monkeypatch.setattr(probekept, "_read", limits_changed)
    a_new_host(monkeypatch)
    assert bwprobe.result()[0].ok and len(made_probes) == 4
    # And unchanged since: taken (the control).
    a_new_host(monkeypatch)
    assert bwprobe.result()[0].ok and len(made_probes) == 4


def test_an_answer_that_bwrap_does_not_work_is_not_kept_and_removes_the_kept_one(
    kept_file, made_probes, monkeypatch
):
    from run_bash.sandbox import seccomp

    assert bwprobe.result()[0].ok and kept_file.exists()

    def no_memfd() -> int:
        raise OSError(38, "Function not implemented")

    # A probe that finds bwrap not working (its filter cannot be made) is not kept, and what
    # was kept goes: a later host probes.
    monkeypatch.setattr(seccomp, "program_fd", no_memfd)
    a_new_host(monkeypatch)
    kept_file.unlink()
    assert not bwprobe.result()[0].ok
    assert not kept_file.exists()


def test_a_kept_answer_that_is_not_the_users_own_or_not_sound_is_ignored(
    kept_file, made_probes, monkeypatch
):
    bwprobe.result()
    good = kept_file.read_text()
    for bad, mode in (
        (good, 0o664),  # writable by the group
        ("{not json", 0o600),
        (json.dumps({"state": json.loads(good)["state"], "answer": "yes"}), 0o600),
        (json.dumps({"state": [], "answer": json.loads(good)["answer"]}), 0o600),
    ):
        kept_file.write_text(bad)
        kept_file.chmod(mode)
        a_new_host(monkeypatch)
        before = len(made_probes)
        assert bwprobe.result()[0].ok
        assert len(made_probes) == before + 1, (bad, oct(mode))
    # A link in its place is not followed.
    target = kept_file.with_name("elsewhere.json")
    target.write_text(good)
    target.chmod(0o600)
    kept_file.unlink()
    kept_file.symlink_to(target)
    a_new_host(monkeypatch)
    before = len(made_probes)
    bwprobe.result()
    assert len(made_probes) == before + 1


def test_the_answer_is_kept_for_the_state_read_before_the_probe_ran(
    kept_file, made_probes, monkeypatch
):
    """A setting that changes while the probe runs: the answer is kept for what was read before
    it, so the next host (which reads the new setting) probes again."""
    real_read = probekept._read
    changed = {"now": False}

    def limits(path: str) -> str | None:
        text = real_read(path)
        return "0\n" if changed["now"] and path.endswith("max_user_namespaces") else text

    monkeypatch.setattr(probekept, "_read", limits)
    bwprobe.start()  # reads the state, starts the probe
    assert len(made_probes) == 1
    changed["now"] = True  # while it runs
    assert bwprobe.result()[0].ok
    a_new_host(monkeypatch)
    bwprobe.result()
    assert len(made_probes) == 2, "kept for the state before the change: probed again"
    a_new_host(monkeypatch)
    bwprobe.result()
    assert len(made_probes) == 2, "the control: kept for the state now, and taken"
