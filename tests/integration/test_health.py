"""`:checkhealth run_bash` renders the layered report."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.nvim


def health_text(editor):
    editor.nvim.command("checkhealth run_bash")
    return "\n".join(editor.nvim.current.buffer[:])


def test_health_reports_every_layer(editor):
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    text = health_text(editor)
    assert "OK Neovim 0.1" in text
    assert "the plugin's venv" in text or "Python:" in text
    for module in ("msgpack", "bashlex", "psutil", "sandlock"):
        assert f"OK {module} " in text
    assert "host started" in text
    assert "none (configured): no confinement" in text
    assert "WITHOUT a sandbox" in text
    assert "CodeCompanion" in text
    assert "run_bash.log" in text
    store = editor.lua("return require('run_bash.undo').path()")
    assert f"OK {store}: " in text and "change set(s)" in text and "the last 50 runs" in text


def test_health_stops_at_a_broken_python(editor):
    editor.nvim.vars["run_bash_python"] = "/nonexistent/python3"
    text = health_text(editor)
    assert "ERROR Python not found: /nonexistent/python3" in text
    assert "make deps" in text
    assert "host started" not in text


def test_health_says_which_backend_auto_chose_and_why(editor):
    editor.lua("require('run_bash').setup({})")
    chosen = editor.lua("return require('run_bash').check('true')")
    text = health_text(editor)
    if chosen["sandboxed"]:
        assert f"OK {chosen['backend']} (chosen by auto): available" in text
        assert (
            f"commands run in the {chosen['backend']} sandbox (auto: {chosen['backend']} works here"
            in text
        )
        assert "OK prepared sandboxes: active (sandbox.prepare)" in text  # the default
    else:
        assert "commands run WITHOUT a sandbox (auto: no sandbox works here" in text
        assert "prepared sandboxes: off" in text
    assert chosen["chosen_because"].startswith("auto: ")


def test_health_says_why_prepared_sandboxes_are_off(editor):
    editor.lua("require('run_bash').setup({ sandbox = { prepare = false } })")
    text = health_text(editor)
    assert "prepared sandboxes: off: sandbox.prepare = false" in text
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none', prepare = true } })")
    assert "prepared sandboxes: off: the none backend has nothing to prepare" in health_text(editor)


def test_health_says_whether_the_memory_cap_holds_for_the_whole_run(editor):
    """The same answer the runtime acts on (``cgroups.CGROUPS``): a memory cgroup per run and
    where, or a warning that the cap is per process."""
    from run_bash.sandbox.cgroups import CGROUPS

    editor.lua("require('run_bash').setup({})")
    text = health_text(editor)
    whole, where = CGROUPS.describe()
    if whole:
        assert "OK memory cap (sandbox.limits.max_memory) is for the whole run: " in text
        assert where.split(" under ", 1)[1].split()[0] in text
    else:
        assert "WARNING memory cap (sandbox.limits.max_memory) is per process" in text
