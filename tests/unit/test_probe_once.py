"""The backends' system probes run once per host for the same programs: every ``setup()`` makes
new backend objects, and the editor waits for setup's answer."""

from __future__ import annotations

import shutil

import pytest

from run_bash.config import parse_config
from run_bash.sandbox.bubblewrap import Bubblewrap, bwrap_path


def test_new_bubblewrap_objects_do_not_run_bwrap_again(tmp_path, monkeypatch):
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bwrap not installed")
    first = Bubblewrap(parse_config({})).availability()
    again = Bubblewrap(parse_config({"sandbox": {"backend": "bubblewrap"}})).availability()
    assert again is first  # the kept answer, not a new probe
    # The control: another bwrap program is probed anew (and answers the same here).
    link = tmp_path / "bwrap"
    link.symlink_to(real)
    monkeypatch.setenv("RUN_BASH_BWRAP", str(link))
    bwrap_path.cache_clear()  # read once per process
    try:
        other = Bubblewrap(parse_config({})).availability()
    finally:
        monkeypatch.delenv("RUN_BASH_BWRAP")
        bwrap_path.cache_clear()
    assert other is not first and other.ok == first.ok, other
    assert Bubblewrap(parse_config({})).availability() is first
