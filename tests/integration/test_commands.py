"""Ex-commands in a real headless Neovim: :RunBash, :RunBashSessions, :RunBashKill, :RunBashOutput."""

from __future__ import annotations

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.nvim

SETUP_NONE = "require('run_bash').setup({ sandbox = { backend = 'none' } })"


def buf_lines(editor, name):
    return editor.lua(
        """
        local b = vim.fn.bufnr(...)
        if b == -1 then return nil end
        return vim.api.nvim_buf_get_lines(b, 0, -1, false)
        """,
        name,
    )


def session_ids(editor):
    return editor.lua("return vim.tbl_keys(require('run_bash').sessions)")


def accept_next_approval(editor):
    """Press `a` in the approval window once it is open."""
    wait_for(lambda: editor.lua("return require('run_bash.approval')._active_win()"))
    editor.nvim.input("a")


def test_runbash_streams_live_and_ends_with_status(editor):
    editor.lua(SETUP_NONE)
    editor.nvim.command("RunBash for i in 1 2 3; do echo tick$i; sleep 0.4; done")
    accept_next_approval(editor)  # the none backend always asks
    sid = wait_for(lambda: session_ids(editor))[0]
    name = f"run_bash://{sid}"
    # Live: the first line shows up while the command still runs.
    wait_for(lambda: "tick1" in (buf_lines(editor, name) or []))
    assert editor.lua("return require('run_bash').sessions[...].status", sid) == "running"
    lines = wait_for(lambda: (ls := buf_lines(editor, name)) and ls[-1].startswith("[exit") and ls)
    assert lines[0].startswith("$ for i in 1 2 3")
    assert [x for x in lines if x.startswith("tick")] == ["tick1", "tick2", "tick3"]
    assert "exit 0" in lines[-1] and "WITHOUT SANDBOX" in lines[-1]


def test_runbash_failure_status_line(editor):
    editor.lua(SETUP_NONE)
    editor.nvim.command("RunBash echo oops; exit 7")
    accept_next_approval(editor)
    sid = wait_for(lambda: session_ids(editor))[0]
    lines = wait_for(
        lambda: (ls := buf_lines(editor, f"run_bash://{sid}")) and "[" in ls[-1] and ls
    )
    assert "oops" in lines
    assert "exit 7" in lines[-1]


def test_runbash_buffer_keeps_text_a_carriage_return_would_hide(editor):
    editor.lua(SETUP_NONE)
    editor.nvim.command("RunBash printf 'rm -rf ~ done\\rAll 42 tests passed\\n'")
    accept_next_approval(editor)
    sid = wait_for(lambda: session_ids(editor))[0]
    lines = wait_for(
        lambda: (ls := buf_lines(editor, f"run_bash://{sid}")) and ls[-1].startswith("[exit") and ls
    )
    assert "rm -rf ~ done\u240dAll 42 tests passed" in lines


def test_sessions_kill_and_output_commands(editor):
    editor.lua(SETUP_NONE)
    editor.lua(
        "require('run_bash').run({ cmd = 'echo hi; sleep 300', bg_after = 0.5, "
        "unsandboxed_ok = true })"
    )
    sid = wait_for(lambda: session_ids(editor))[0]
    # Completion comes from the Lua mirror, without RPC.
    assert editor.nvim.funcs.getcompletion("RunBashKill ", "cmdline") == [sid]
    editor.nvim.command("RunBashSessions")
    lines = buf_lines(editor, "run_bash://sessions")
    assert lines[0].split()[:5] == ["ID", "STATUS", "PID", "AGE", "BACKEND"]
    assert lines[1].startswith(sid) and "running" in lines[1] and "echo hi; sleep 300" in lines[1]
    editor.nvim.command(f"RunBashOutput {sid}")
    out = f"run_bash://{sid}/output"
    wait_for(lambda: "hi" in (buf_lines(editor, out) or []))
    editor.nvim.command(f"RunBashKill {sid}")
    wait_for(lambda: editor.lua("return require('run_bash').sessions[...].status", sid) == "killed")
    wait_for(lambda: "killed" in buf_lines(editor, out)[-1])


@pytest.mark.parametrize("backend", ["none", "sandlock", "bubblewrap"])
def test_sessions_show_the_ports_a_session_listens_on(editor, backend):
    """A background server's port is in :RunBashSessions and the session info, whether it lives in
    the host's network (none) or in its project's namespace (sandlock, bubblewrap: the host port
    it is forwarded to is shown beside it, and in the tool's `list`); a session that listens on
    nothing (the control) shows none."""
    from run_bash.config import parse_config
    from run_bash.sandbox.base import get_backend

    if not get_backend(backend, parse_config({})).availability().ok:
        pytest.skip(f"{backend} is not available here")
    editor.lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)
    server = (
        "python3 -c \"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen();"
        " print('PORT', s.getsockname()[1], flush=True); time.sleep(300)\""
    )
    for cmd in (server, "sleep 300"):
        editor.lua(
            "require('run_bash').run({ cmd = ..., bg_after = 0.5, unsandboxed_ok = true })", cmd
        )
    wait_for(lambda: len(session_ids(editor)) == 2)
    listed = {s["cmd"]: s for s in editor.lua("return require('run_bash').sessions_list()")}
    sid = listed[server]["id"]
    out = f"run_bash://{sid}/output"
    editor.nvim.command(f"RunBashOutput {sid}")
    line = wait_for(lambda: [x for x in buf_lines(editor, out) or [] if x.startswith("PORT")])
    port = int(line[0].split()[1])
    listed = {s["cmd"]: s for s in editor.lua("return require('run_bash').sessions_list()")}
    assert listed[server]["ports"] == [port] and listed["sleep 300"]["ports"] == []
    cell = str(port)
    if backend != "none":
        # Forwarded to the host on a port the kernel picked (#20 class 6): the list names it.
        def forwarded() -> list[dict[str, int]]:
            info = {s["cmd"]: s for s in editor.lua("return require('run_bash').sessions_list()")}
            return info[server].get("forwarded") or []

        [fwd] = wait_for(forwarded)
        assert fwd["port"] == port and fwd["host_port"] != port
        cell = f"{port}>{fwd['host_port']}"
        text = editor.lua(
            "return (require('run_bash.tool_format').format({ action = 'list', "
            "sessions = require('run_bash').sessions_list() }))"
        )
        assert f"listening on port {port} (from the host: 127.0.0.1:{fwd['host_port']})" in text
    else:
        assert not listed[server].get("forwarded")  # in the host's own network: nothing to do
    editor.nvim.command("RunBashSessions")
    lines = buf_lines(editor, "run_bash://sessions")
    assert lines[0].split()[:6] == ["ID", "STATUS", "PID", "AGE", "BACKEND", "PORTS"]
    row = next(x for x in lines if x.startswith(sid))
    assert row.split()[5] == cell, lines
    editor.nvim.command("RunBashKill!")


def test_kill_bang_kills_all(editor):
    editor.lua(SETUP_NONE)
    for _ in range(3):
        editor.lua(
            "require('run_bash').run({ cmd = 'sleep 300', bg_after = 0.2, unsandboxed_ok = true })"
        )
    wait_for(lambda: len(session_ids(editor)) == 3)
    editor.nvim.command("RunBashKill!")
    wait_for(
        lambda: all(
            s["status"] == "killed"
            for s in editor.lua("return require('run_bash').sessions_list()")
        )
    )


def test_bad_arguments_give_one_error(editor):
    editor.lua(SETUP_NONE)
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    editor.nvim.command("RunBashKill nosuch")
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert len(msgs) == 1
    assert "unknown session id 'nosuch'" in msgs[0][0] and msgs[0][1] == 4
    editor.lua("_G.__msgs = {}")
    editor.nvim.command("RunBashOutput nosuch")
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert "unknown session id" in msgs[0][0]


def test_check_with_options_that_are_not_a_table_is_one_error(editor):
    editor.lua(SETUP_NONE)
    answer, err = editor.lua("return { require('run_bash').check('ls', 'x') }")
    assert answer is None and err == "`check` should be a table, not string 'x'"
    ok = editor.lua("return require('run_bash').check('ls', { cwd = vim.fn.getcwd() })")
    assert isinstance(ok, dict) and "needs_approval" in ok  # the control: a table is taken


def test_hundred_runbash_calls_in_a_row(editor):
    editor.lua(SETUP_NONE)
    done = editor.lua(
        """
        local rb, n = require('run_bash'), 0
        for i = 1, 100 do
          local ok = rb.run({ cmd = 'echo ' .. i, unsandboxed_ok = true }, function(r)
            if r.output == (tostring(i) .. '\\n') then n = n + 1 end
          end)
          assert(ok)
        end
        vim.wait(20000, function() return n == 100 end, 5)
        return n
        """
    )
    assert done == 100


def test_hundred_runbash_ex_commands_share_one_output_window(editor):
    """`:RunBash` a hundred times: every run gets its buffer, in one reused split, no E36."""
    editor.lua(SETUP_NONE)
    editor.nvim.command("RunBash echo again")
    wait_for(lambda: editor.lua("return require('run_bash.approval')._active_win()"))
    editor.nvim.input("A")  # always allow this exact command (the none backend asks)
    wait_for(lambda: len(session_ids(editor)) == 1)
    editor.nvim.command("wincmd p")
    # (Vim's own sh syntax, used to highlight the approval window, leaves a silenced E184.)
    editor.nvim.command("let v:errmsg = ''")
    for _ in range(99):
        editor.nvim.command("RunBash echo again")
    ids = wait_for(lambda: len(ids := session_ids(editor)) == 100 and ids)

    def finished():
        return all(
            (ls := buf_lines(editor, f"run_bash://{i}")) and "exit 0" in ls[-1] and "again" in ls
            for i in ids
        )

    wait_for(finished, timeout=30)
    assert editor.lua("return #vim.api.nvim_tabpage_list_wins(0)") == 2
    assert editor.nvim.eval("v:errmsg") == ""


def test_runbash_output_beside_a_live_runbash_buffer(editor):
    """Both buffers follow the run to its end, each line exactly once."""
    editor.lua(SETUP_NONE)
    sid = editor.lua(
        """
        local info = require('run_bash.commands').start_in_buffer(
          'for i in $(seq 1 8); do echo n$i; sleep 0.25; done', { unsandboxed_ok = true })
        return info.id
        """
    )
    live, follow = f"run_bash://{sid}", f"run_bash://{sid}/output"
    wait_for(lambda: "n2" in (buf_lines(editor, live) or []))
    editor.nvim.command(f"RunBashOutput {sid}")
    editor.nvim.command(f"RunBashOutput {sid}")  # reopening replaces its own follower only
    for name in (live, follow):
        lines = wait_for(lambda n=name: (ls := buf_lines(editor, n)) and "exit 0" in ls[-1] and ls)
        assert [x for x in lines if x.startswith("n")] == [f"n{i}" for i in range(1, 9)], name


def test_rule_function_gets_the_builtin_defaults(editor):
    """`fs_writable = function(d) ... end` extends the defaults; the project stays writable."""
    got = editor.lua(
        """
        _G.__seen = nil
        require('run_bash').setup({ sandbox = { backend = 'none', rules = {
          fs_writable = function(d) _G.__seen = vim.deepcopy(d); return vim.list_extend({ '/var/log' }, d) end,
        } } })
        assert(require('run_bash').request('sessions'))
        return _G.__seen
        """
    )
    assert "." in got and not [d for d in got if "npm" in d]  # no shared cache is writable
    policy = editor.lua("return require('run_bash').request('rule_defaults')")
    assert policy["fs_writable"] == got


def test_parse_bg_flag(editor):
    got = editor.lua(
        """
        local p = require('run_bash.commands').parse_bg
        local out = {}
        for _, a in ipairs({ '-bg make serve', '-bg=5 npm run dev', 'echo -bg', '-bgx y', '-bg' }) do
          local n, rest = p(a)
          table.insert(out, { n or vim.NIL, rest })
        end
        return out
        """
    )
    assert got == [
        [1, "make serve"],
        [5, "npm run dev"],
        [None, "echo -bg"],
        [None, "-bgx y"],
        [1, ""],
    ]


def test_runbash_bg_runs_a_background_session(editor):
    editor.lua(SETUP_NONE)
    editor.nvim.command("RunBash -bg echo start; sleep 2; echo end")
    accept_next_approval(editor)
    sid = wait_for(lambda: session_ids(editor))[0]
    name = f"run_bash://{sid}"
    wait_for(
        lambda: editor.lua("return require('run_bash').sessions[...].status", sid) == "running"
    )
    assert editor.lua("return require('run_bash').sessions[...].background", sid) is True
    lines = wait_for(lambda: (ls := buf_lines(editor, name)) and "exit 0" in ls[-1] and ls)
    assert "start" in lines and "end" in lines


def run_and_wait(editor, cmd):
    return editor.run_sync({"cmd": cmd, "unsandboxed_ok": True})


def test_the_lua_mirror_forgets_what_the_host_forgets_but_not_an_open_output(editor):
    editor.lua(
        "require('run_bash').setup({ sandbox = { backend = 'none' }, "
        "sessions = { keep_finished = 2 } })"
    )
    first = run_and_wait(editor, "echo first")["id"]
    editor.nvim.command(f"RunBashOutput {first}")  # pins it while the buffer exists
    wait_for(lambda: "first" in (buf_lines(editor, f"run_bash://{first}/output") or []))
    later = [run_and_wait(editor, f"echo n{i}")["id"] for i in range(4)]
    # The host kept the two newest and the pinned one; the mirror follows its `forgotten` events.
    wait_for(lambda: sorted(session_ids(editor)) == sorted([first, *later[-2:]]))
    assert sorted(s["id"] for s in editor.lua("return require('run_bash').sessions_list()")) == (
        sorted([first, *later[-2:]])
    )
    editor.nvim.command(f"bwipeout run_bash://{first}/output")
    wait_for(lambda: first not in session_ids(editor))
    assert editor.nvim.funcs.getcompletion(f"RunBashOutput {first}", "cmdline") == []
