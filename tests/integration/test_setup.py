"""setup() in a real Neovim: problems are reported at setup, once, naming every bad key, and the
previous options stay in force; the tool's schema and description come from setup's reply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.nvim


def capture_notes(editor):
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")


def notes(editor):
    return editor.lua("return _G.__msgs")


def test_a_bad_option_is_reported_at_setup_without_any_command(editor):
    """The host starts in the background at setup() and names the problem; nothing waits."""
    capture_notes(editor)
    editor.lua("require('run_bash').setup({ bogus = 1, output = { max_chars = 'lots' } })")
    msgs = wait_for(lambda: notes(editor))
    assert len(msgs) == 1 and msgs[0][1] == 4  # one ERROR
    assert "unknown option `bogus`" in msgs[0][0] and "`output.max_chars`" in msgs[0][0]


def test_a_function_where_no_option_takes_one_is_a_config_error(editor):
    """A Lua function where only data belongs cannot go to the host in a request: it is reported
    at setup like any bad value (it once left the host's start waiting 30 s) and runs go on.
    Control: the same options with a value there apply."""
    capture_notes(editor)
    editor.lua(
        """require('run_bash').setup({ default_timeout = 77,
             output = { max_chars = function() return 1 end } })"""
    )
    msgs = wait_for(lambda: notes(editor))
    assert "`output.max_chars`: a function is not an option value" in msgs[0][0], msgs
    facts = editor.lua("return require('run_bash').facts()")
    assert facts["default_timeout"] != 77 and "output.max_chars" in facts["config_error"]
    r = editor.run_sync({"cmd": "echo still", "unsandboxed_ok": True})
    assert r["output"] == "still\n", r
    editor.lua(
        "require('run_bash').setup({ default_timeout = 77, output = { max_chars = 20000 } })"
    )
    facts = editor.lua("return require('run_bash').facts()")
    assert facts["default_timeout"] == 77 and facts.get("config_error") is None, facts


def test_the_previous_good_options_stay_in_force_and_the_error_comes_once(editor):
    capture_notes(editor)
    editor.lua(
        "require('run_bash').setup({ default_timeout = 42, sandbox = { backend = 'none' } })"
    )
    assert editor.lua("return require('run_bash').facts().default_timeout") == 42
    for _ in range(2):
        editor.lua("require('run_bash').setup({ bogus = 1, default_timeout = 7 })")
        assert editor.lua("return require('run_bash').facts().default_timeout") == 42
    msgs = wait_for(lambda: notes(editor))
    assert [m for m, _ in msgs if "bogus" in m] == [msgs[0][0]]  # reported once
    facts = editor.lua("return require('run_bash').facts()")
    assert facts["backend"] == "none" and "bogus" in facts["config_error"]
    desc = editor.lua("return require('run_bash.tool').create().schema['function'].description")
    assert "the user's run_bash options were rejected (invalid config: unknown option" in desc
    r = editor.run_sync({"cmd": "echo still", "unsandboxed_ok": True})
    assert r["output"] == "still\n"
    # After a restart of the host the last good options are sent again, not the bad ones.
    editor.lua("require('run_bash').stop()")
    wait_for(lambda: editor.lua("return require('run_bash').is_running()") is False)
    assert editor.lua("return require('run_bash').facts().default_timeout") == 42


def test_a_failing_sandbox_rules_function_is_a_config_error(editor):
    capture_notes(editor)
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    assert editor.lua("return require('run_bash').facts().backend") == "none"
    editor.lua(
        """require('run_bash').setup({ sandbox = { backend = 'sandlock', rules = {
             fs_writable = function() error('no list today') end,
             fs_readable = function() return 5 end } } })"""
    )
    msgs = wait_for(lambda: notes(editor))
    text = msgs[0][0]
    assert "`sandbox.rules.fs_writable`: the function failed" in text and "no list today" in text
    assert "`sandbox.rules.fs_readable`: the function should return a list, not number" in text
    assert editor.lua("return require('run_bash').facts().backend") == "none"  # kept
    # Control: a working rule function is applied.
    editor.lua(
        """require('run_bash').setup({ sandbox = { backend = 'none', rules = {
             fs_writable = function(d) return vim.list_extend({ '/var/tmp/x' }, d) end } } })"""
    )
    assert editor.lua("return require('run_bash').facts().config_error") is None


def test_the_schema_says_the_configured_timeout_and_the_limits(editor):
    editor.lua(
        "require('run_bash').setup({ default_timeout = 900, sandbox = { backend = 'none' } })"
    )
    schema = editor.lua("return require('run_bash.tool').create().schema")
    props = schema["function"]["parameters"]["properties"]
    assert "(default 900, max 3600)" in props["timeout"]["description"]
    assert "(1-60, default 30)" in props["timeout"]["description"]
    assert "Max 60." in props["bg_after"]["description"]
    assert "default 900, max 3600" in schema["function"]["description"]
    assert "skip_sandbox" not in props  # no sandbox to skip with backend "none"


def test_a_broken_host_is_described_as_broken_not_as_no_sandbox(editor):
    editor.nvim.vars["run_bash_python"] = "/nonexistent/python3"
    desc = editor.lua("return require('run_bash.tool').create().schema['function'].description")
    assert "The run_bash tool is not working right now" in desc
    assert "Python not found: /nonexistent/python3" in desc and ":checkhealth run_bash" in desc
    assert "No sandbox" not in desc and "Sandboxed" not in desc
    # Control: with the host working, the description says where commands run.
    editor.nvim.vars["run_bash_python"] = ""
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    desc = editor.lua("return require('run_bash.tool').create().schema['function'].description")
    assert "No sandbox is available" in desc and "not working" not in desc


def startup_line(editor) -> str:
    """The host's start-up marks (``run_bash/startup.py``) from its log."""
    from pathlib import Path

    log = Path(editor.lua("return require('run_bash.host').log_path()"))
    lines = [ln for ln in log.read_text().splitlines() if "start-up (ms from jobstart)" in ln]
    assert lines, "the host logged no start-up line"
    return lines[-1]


def test_the_options_go_with_the_hosts_hello_and_setup_keeps_what_they_made(editor):
    """setup() starts the host and sends the options with its ``hello``: the host applies them
    before it says ``ready`` (its start-up marks show ``setup`` before ``ready``), and Lua's
    own setup request, with the same options, is answered as they made it: the notice they give
    comes once, the limits are theirs. Control: options with a path rule given as a function
    (resolved only once the host answers) are not sent early, and still apply."""
    capture_notes(editor)
    editor.lua("require('run_bash').setup({ default_timeout = 42, sandbox = { enabled = false } })")
    assert editor.lua("return require('run_bash').facts().default_timeout") == 42
    line = startup_line(editor)
    assert "setup +" in line and line.index("setup +") < line.index("ready +"), line
    msgs = wait_for(lambda: notes(editor))
    assert [m for m, _ in msgs if "sandbox.enabled" in m] == [msgs[0][0]], msgs  # once
    editor.lua("require('run_bash').stop()")
    wait_for(lambda: editor.lua("return require('run_bash').is_running()") is False)
    editor.lua(
        """require('run_bash').setup({ default_timeout = 43, sandbox = { backend = 'none',
             rules = { fs_writable = function(d) return d end } } })"""
    )
    assert editor.lua("return require('run_bash').facts().default_timeout") == 43
    assert "setup +" not in startup_line(editor)


def test_options_changed_while_the_host_starts_are_the_ones_in_force(editor):
    """The options sent with ``hello`` are the first call's; a second setup() before the host
    is up sends other options, and those are applied in full (nothing the first ones made is
    kept in their place)."""
    got = editor.lua(
        """
        local rb = require('run_bash')
        rb.setup({ default_timeout = 11, sandbox = { backend = 'none' } })
        rb.setup({ default_timeout = 12, sandbox = { backend = 'none' } })
        return require('run_bash.host').is_up()
        """
    )
    assert got is False  # both came before the host was up
    assert editor.lua("return require('run_bash').facts().default_timeout") == 12
    assert "setup +" in startup_line(editor)  # the first options were applied early
    r = editor.run_sync({"cmd": "echo fine", "unsandboxed_ok": True})
    assert r["output"] == "fine\n" and r["backend"] == "none", r


def test_without_setup_the_defaults_go_with_hello(editor):
    """First use without setup(): the defaults (and CodeCompanion's files) go with the host's
    ``hello``, so the host prepares the first command's sandbox while it starts and the first
    command takes it. A later setup() with the same (empty) options keeps it all; other options
    apply in full."""
    from run_bash.backends import CONFINING_BACKENDS
    from tests.integration.test_host import backend_available

    chosen = next((n for n in CONFINING_BACKENDS if backend_available(n)), None)
    if chosen is None:
        pytest.skip("no sandbox backend is available here")
    r = wait_for(
        lambda: editor.lua(
            """
            if _G.__first == nil then
              _G.__first = false
              require('run_bash').run({ cmd = 'echo first' }, function(r) _G.__first = r end)
            end
            return _G.__first or nil
            """
        ),
        timeout=60,
    )
    assert r["exit_code"] == 0 and r["backend"] == chosen, r
    assert "took_spare" in (r.get("timing") or {}), r  # the sandbox made while the host started
    assert "setup +" in startup_line(editor)
    editor.lua("require('run_bash').setup({})")
    assert editor.lua("return require('run_bash').facts().default_timeout") == 300
    editor.lua("require('run_bash').setup({ default_timeout = 77 })")
    assert editor.lua("return require('run_bash').facts().default_timeout") == 77


def test_a_host_keeps_the_modules_it_imported_and_the_next_one_takes_them(editor):
    """A host that lived past its start keeps the modules it imported (``modcache``), and the
    next host takes them from that file: its start-up line counts them, and it works."""
    import re
    import sys
    import time

    from tests.conftest import ROOT

    kept = ROOT / "python" / "run_bash" / "__pycache__"
    kept = kept / f"startup-modules.{sys.implementation.cache_tag}.bin"
    before = time.time_ns()
    editor.lua("require('run_bash').setup({ sandbox = { backend = 'none' } })")
    first = editor.lua("require('run_bash').request('sessions'); return require('run_bash')._job()")
    counts = re.compile(r"modules: (\d+) kept, (\d+) changed")
    got = counts.search(startup_line(editor))
    assert got, startup_line(editor)
    if not (int(got.group(1)) > 100 and got.group(2) == "0"):
        # What it imported differs from what was kept: written a moment after its start.
        wait_for(lambda: kept.exists() and kept.stat().st_mtime_ns >= before, timeout=10)
    editor.nvim.funcs.jobstop(first)
    wait_for(lambda: editor.lua("return require('run_bash')._job()") is None)
    r = editor.run_sync({"cmd": "echo again", "unsandboxed_ok": True})
    assert r["output"] == "again\n", r
    got = counts.search(startup_line(editor))
    assert got and int(got.group(1)) > 100 and got.group(2) == "0", startup_line(editor)


def test_the_next_hosts_first_sandbox_starts_from_the_policy_the_first_run_got(editor):
    """The whole wire (``sessions/lastpolicy.py``): Lua names the file, a host's first run keeps
    its policy there, and the next host's first sandbox in the same directory is made from it,
    and taken by that host's first run (``:checkhealth`` counts it). The first host's own first
    sandbox had nothing to start from: the control."""
    from run_bash.backends import CONFINING_BACKENDS
    from tests.integration.test_health import health_text
    from tests.integration.test_host import backend_available

    chosen = next((n for n in CONFINING_BACKENDS if backend_available(n)), None)
    if chosen is None:
        pytest.skip("no sandbox backend is available here")
    editor.lua("require('run_bash').setup(...)", {"sandbox": {"backend": chosen}})
    kept = Path(editor.lua("return vim.fn.stdpath('state')")) / "run_bash" / "first-policies.json"
    cwd = editor.lua("return vim.fn.getcwd()")
    for host in ("first", "next"):
        r = editor.run_sync({"cmd": "echo ran"}, timeout=60)
        assert r["exit_code"] == 0 and r["backend"] == chosen, r
        assert "took_spare" in (r.get("timing") or {}), r  # the sandbox made as the host started
        made = "made from the policy the last host's first run got" in health_text(editor)
        assert made == (host == "next"), host
        wait_for(lambda: kept.exists() and json.loads(kept.read_text())["dirs"][0][0] == cwd)
        editor.lua("require('run_bash').stop()")
        wait_for(lambda: editor.lua("return require('run_bash').is_running()") is False)
