"""The approval window and the audit log, in a real headless Neovim (keys sent with nvim_input)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.nvim


def floats(editor):
    return editor.lua(
        """
        local out = {}
        for _, w in ipairs(vim.api.nvim_list_wins()) do
          if vim.api.nvim_win_get_config(w).relative ~= '' then
            table.insert(out, table.concat(vim.api.nvim_buf_get_lines(
              vim.api.nvim_win_get_buf(w), 0, -1, false), '\\n'))
          end
        end
        return out
        """
    )


def setup(editor, backend="none"):
    editor.lua("require('run_bash').setup({ sandbox = { backend = ... } })", backend)


def host_up(editor):
    """Wait for the host setup() started: a run then gets the host's answer at once (while it
    starts, a run waits in Lua's queue and the answer reaches its callback)."""
    assert editor.lua("return require('run_bash').request('sessions')") is not None


@pytest.fixture
def target(editor):
    path = editor.work / "victim"
    path.mkdir()
    (path / "file").write_text("keep me")
    return path


def test_paused_command_opens_one_window_and_a_runs_it(editor, target):
    setup(editor)
    editor.nvim.command(f"RunBash rm -rf {target}")
    text = wait_for(lambda: floats(editor))
    assert len(text) == 1
    assert f"rm -rf {target}" in text[0]
    assert "WITHOUT SANDBOX" in text[0]
    editor.nvim.input("a")
    wait_for(lambda: not target.exists())
    assert floats(editor) == []


@pytest.mark.parametrize("keys", ["q", "<Esc>", "r<CR>"])
def test_reject_and_cancel_do_not_run(editor, target, keys):
    setup(editor)
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.input(keys)
    wait_for(lambda: floats(editor) == [])
    assert (target / "file").read_text() == "keep me"
    wait_for(lambda: editor.lua("return vim.tbl_count(require('run_bash').sessions)") == 0)


def test_closing_the_window_cancels(editor, target):
    setup(editor)
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.command("close")
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 0)
    assert (target / "file").exists()
    # No mappings or autocommands are left behind.
    left = editor.lua(
        "local ok, a = pcall(vim.api.nvim_get_autocmds, { group = 'RunBashApproval' })"
        " return ok and #a or 0"
    )
    assert left == 0


def test_always_accept_skips_the_window_next_time(editor, editor_tmp=None):
    setup(editor)
    marker = editor.work / "count"
    cmd = f"echo x >> {marker}"
    editor.nvim.command(f"RunBash {cmd}")
    wait_for(lambda: floats(editor))
    editor.nvim.input("A")
    wait_for(lambda: marker.exists() and marker.read_text() == "x\n")
    editor.nvim.command(f"RunBash {cmd}")
    wait_for(lambda: marker.read_text() == "x\nx\n")
    assert floats(editor) == []


def test_two_approvals_are_queued(editor, tmp_path):
    setup(editor)
    a, b = editor.work / "a", editor.work / "b"
    editor.nvim.command(f"RunBash touch {a}")
    editor.nvim.command(f"RunBash touch {b}")
    first = wait_for(lambda: floats(editor))
    assert len(first) == 1 and str(a) in first[0]
    assert editor.lua("return require('run_bash.approval').pending()") == 2
    editor.nvim.input("a")
    second = wait_for(lambda: (f := floats(editor)) and str(b) in f[0] and f)
    assert len(second) == 1
    editor.nvim.input("q")
    wait_for(lambda: a.exists())
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 0)
    assert not b.exists()


def test_audit_log_records_decisions_and_runs(editor, target):
    setup(editor)
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.input("a")
    wait_for(lambda: not target.exists())
    path = editor.lua("return require('run_bash.audit_log').path()")

    def records():
        if not os.path.exists(path):
            return None
        recs = [json.loads(x) for x in Path(path).read_text().splitlines()]
        return recs if any(r["event"] == "run" for r in recs) else None

    recs = wait_for(records)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    decision = next(r for r in recs if r["event"] == "decision")
    assert decision["decided_by"] == "user_accept"
    assert decision["cmd"] == f"rm -rf {target}"
    run = next(r for r in recs if r["event"] == "run")
    assert decision["session_id"] == run["id"]  # a decision joins to its run
    assert run["exit_code"] == 0 and run["sandboxed"] is False
    assert {"duration_s", "output_bytes", "timed_out", "killed", "backend"} <= set(run)


def test_safe_sandboxed_command_opens_no_window(editor):
    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock is not available here")
    setup(editor, "sandlock")
    editor.nvim.command("RunBash echo safe-and-sound")
    sid = wait_for(lambda: editor.lua("return vim.tbl_keys(require('run_bash').sessions)"))[0]
    assert floats(editor) == []
    name = f"run_bash://{sid}"
    lines = wait_for(
        lambda: (
            (
                ls := editor.lua(
                    """
                    local buf = vim.fn.bufnr(...)
                    return buf ~= -1 and vim.api.nvim_buf_get_lines(buf, 0, -1, false) or {}
                    """,
                    name,
                )
            )
            and ls[-1].startswith("[")
            and ls
        )
    )
    assert "safe-and-sound" in lines
    assert "sandbox: sandlock" in lines[-1]
    assert floats(editor) == []


def test_bang_always_asks_and_shows_without_sandbox(editor):
    setup(editor, "sandlock")
    editor.nvim.command("RunBash! echo hi")
    text = wait_for(lambda: floats(editor))
    assert "WITHOUT SANDBOX" in text[0]
    editor.nvim.input("q")
    wait_for(lambda: floats(editor) == [])
    wait_for(lambda: editor.lua("return vim.tbl_count(require('run_bash').sessions)") == 0)


def test_api_run_without_approval_is_held_and_asks(editor, target):
    """`require('run_bash').run()` enforces the pause list too: the window asks, nothing runs."""
    setup(editor)
    host_up(editor)
    info = editor.lua(
        """
        _G.__r = nil
        return require('run_bash').run({ cmd = ... }, function(r) _G.__r = r end)
        """,
        f"rm -rf {target}",
    )
    assert info["status"] == "awaiting_approval"
    text = wait_for(lambda: floats(editor))
    assert f"rm -rf {target}" in text[0]
    editor.nvim.input("q")
    r = wait_for(lambda: editor.lua("return _G.__r"))
    assert r["status"] == "cancelled" and "nothing ran" in r["error"]
    assert (target / "file").read_text() == "keep me"


def test_lua_function_rule_decides_a_held_run(editor):
    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock is not available here")
    editor.lua(
        """
        require('run_bash').setup({ sandbox = { backend = 'sandlock' }, pauselist = {
          echo = function(args) return args[1] == 'bad' end } })
        """
    )
    editor.nvim.command("RunBash echo good")
    sid = wait_for(lambda: editor.lua("return vim.tbl_keys(require('run_bash').sessions)"))[0]
    wait_for(lambda: editor.lua("return require('run_bash').sessions[...].status", sid) == "exited")
    assert floats(editor) == []
    editor.nvim.command("RunBash echo bad")
    text = wait_for(lambda: floats(editor))
    assert "your pause-list rule for echo" in text[0] and "sandbox: sandlock" in text[0]
    editor.nvim.input("q")
    wait_for(lambda: floats(editor) == [])


def test_sandboxed_pause_shows_reason_rule_and_cwd(editor, target):
    from tests.integration.test_host import backend_available

    if not backend_available("sandlock"):
        pytest.skip("sandlock is not available here")
    setup(editor, "sandlock")
    editor.nvim.command(f"cd {editor.work}")
    editor.nvim.command("RunBash rm -rf victim")
    text = wait_for(lambda: floats(editor))[0]
    assert "where:  sandbox: sandlock" in text
    assert "why:    `rm -rf victim` deletes files and directories recursively" in text
    assert "rule:   rm" in text and f"cwd:    {editor.work}" in text
    editor.nvim.input("a")
    wait_for(lambda: not target.exists())


@pytest.mark.parametrize("how", ["bwipe!", "q", "wincmd c"])
def test_every_way_of_closing_the_window_cancels(editor, target, how):
    setup(editor)
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.command(how)
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 0)
    wait_for(lambda: editor.lua("return vim.tbl_count(require('run_bash').sessions)") == 0)
    assert (target / "file").read_text() == "keep me"
    assert floats(editor) == []


def test_a_reason_arriving_after_a_cancel_is_ignored(editor, target):
    """`r` asks for a reason; if the request is cancelled meanwhile, the late answer does nothing."""
    setup(editor)
    editor.lua("vim.ui.input = function(_, cb) _G.__late = cb end")
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.input("r")
    wait_for(lambda: editor.lua("return _G.__late ~= nil"))
    editor.nvim.input("q")
    wait_for(lambda: editor.lua("return require('run_bash.approval').pending()") == 0)
    editor.lua("_G.__late('too late')")
    editor.nvim.command(f"RunBash echo next > {editor.work}/next")
    wait_for(lambda: floats(editor))
    editor.nvim.input("a")
    wait_for(lambda: (editor.work / "next").exists())
    assert (target / "file").read_text() == "keep me"


def test_confirm_fallback_when_no_float_can_open(editor, target):
    """If a float cannot be opened, `vim.fn.confirm` asks; its cancel (0) never approves."""
    setup(editor)
    editor.lua(
        """
        local real = vim.api.nvim_open_win
        vim.api.nvim_open_win = function(buf, enter, cfg)
          if cfg.relative == 'editor' then error('no room for a float') end
          return real(buf, enter, cfg)
        end
        _G.__asked = nil
        vim.fn.confirm = function(msg) _G.__asked = msg; return 0 end
        """
    )
    editor.nvim.command(f"RunBash rm -rf {target}")
    asked = wait_for(lambda: editor.lua("return _G.__asked"))
    assert f"rm -rf {target}" in asked
    wait_for(lambda: editor.lua("return vim.tbl_count(require('run_bash').sessions)") == 0)
    assert (target / "file").read_text() == "keep me"


def test_long_command_keeps_where_and_keys_visible(editor):
    setup(editor)
    cmd = "echo " + " ".join(f"word{i}" for i in range(300))  # one line, many screen rows
    editor.nvim.command(f"RunBash {cmd}")
    wait_for(lambda: floats(editor))
    view = editor.lua(
        """
        local win = require('run_bash.approval')._active_win()
        local info = vim.fn.getwininfo(win)[1]
        return { bot = info.botline, last = vim.api.nvim_buf_line_count(info.bufnr),
                 height = info.height, lines = vim.o.lines }
        """
    )
    assert view["bot"] == view["last"]  # the last line (the keys) is on screen
    assert view["height"] <= view["lines"]
    text = editor.lua(
        """
        local win = require('run_bash.approval')._active_win()
        local info = vim.fn.getwininfo(win)[1]
        return vim.api.nvim_buf_get_lines(info.bufnr, info.topline - 1, info.botline, false)
        """
    )
    assert any("WITHOUT SANDBOX" in x for x in text)
    editor.nvim.input("q")


def test_command_is_highlighted_as_bash(editor):
    setup(editor)
    editor.nvim.command('RunBash for f in *.txt; do echo "$f"; done')
    wait_for(lambda: floats(editor))
    groups = editor.lua(
        """
        local win = require('run_bash.approval')._active_win()
        local buf = vim.api.nvim_win_get_buf(win)
        local line = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
        local seen = {}
        vim.api.nvim_win_call(win, function()
          for col = 1, #line do
            for _, id in ipairs(vim.fn.synstack(1, col)) do
              seen[vim.fn.synIDattr(id, 'name')] = true
            end
          end
        end)
        local marks = vim.api.nvim_buf_get_extmarks(buf, -1, { 0, 0 }, { 0, -1 }, { details = true })
        for _, m in ipairs(marks) do
          if m[4].hl_group then seen[m[4].hl_group] = true end
        end
        return vim.tbl_keys(seen)
        """
    )
    # Tree-sitter captures (`@keyword.bash`) when a bash parser is installed, else Vim's sh syntax.
    assert any(g.startswith("@") or g.startswith("sh") for g in groups), groups
    editor.nvim.input("q")


def test_runbashlog_opens_the_audit_log_read_only(editor, target):
    setup(editor)
    editor.lua("_G.__msgs = {}; vim.notify = function(m, l) table.insert(_G.__msgs, {m, l}) end")
    editor.nvim.command("RunBashLog")
    msgs = wait_for(lambda: editor.lua("return _G.__msgs"))
    assert "the audit log is empty" in msgs[0][0]
    editor.nvim.command(f"RunBash rm -rf {target}")
    wait_for(lambda: floats(editor))
    editor.nvim.input("r")
    editor.nvim.input("too risky<CR>")
    path = editor.lua("return require('run_bash.audit_log').path()")

    def logged() -> list[dict]:
        if not os.path.exists(path):
            return []
        return [json.loads(line) for line in Path(path).read_text().splitlines() if line]

    # The decision's line, then the run's (written once the run has ended as rejected).
    wait_for(lambda: any(r.get("event") == "run" for r in logged()))
    editor.nvim.command("RunBashLog")
    buf = editor.lua(
        "return { name = vim.api.nvim_buf_get_name(0), ro = vim.bo.readonly,"
        " mod = vim.bo.modifiable, lines = vim.api.nvim_buf_get_lines(0, 0, -1, false) }"
    )
    assert buf["name"] == path and buf["ro"] and not buf["mod"]
    *_, rec, run = [json.loads(line) for line in buf["lines"]]
    assert rec["decided_by"] == "user_reject" and rec["user_reason"] == "too risky"
    assert rec["rule"] == "rm" or rec["sandboxed"] is False
    assert run["event"] == "run" and run["status"] == "rejected" and run["id"] == rec["session_id"]


@pytest.mark.parametrize(
    "flags",
    [{"approved": "no"}, {"skip_sandbox": True, "unsandboxed_ok": "false"}, {"ask": 1}],
    ids=["approved", "unsandboxed_ok", "ask"],
)
@pytest.mark.parametrize("started", [True, False], ids=["host up", "host starting"])
def test_string_typed_consent_flags_are_refused_through_the_lua_api(editor, target, flags, started):
    """`run({cmd = "rm -rf zz", approved = "no"})` used to run a paused command without asking.
    While the host starts the run waits in Lua's queue: the host's refusal reaches its callback."""
    setup(editor)
    if started:
        host_up(editor)
    got = editor.lua(
        """
        _G.__r = nil
        local info, err = require('run_bash').run(..., function(r) _G.__r = r end)
        return { info = info, err = err }
        """,
        {"cmd": f"rm -rf {target}", **flags},
    )
    name = next(k for k, v in flags.items() if not isinstance(v, bool))
    if started:
        assert got.get("info") is None and f"`{name}` should be true or false" in got["err"]
    else:
        assert got["info"]["status"] == "queued", got
        r = wait_for(lambda: editor.lua("return _G.__r"))
        assert r["status"] == "failed" and f"`{name}` should be true or false" in r["error"]
    assert floats(editor) == [] and (target / "file").read_text() == "keep me"
    assert editor.lua("return require('run_bash').request('sessions')") == []


# -- effects, not text: what undo can take back runs without asking ---------------------------------


def project(editor) -> Path:
    """A repository with a small build/ (ignored, within the undo budget) and a node_modules/
    over it, its undo index built (a first run)."""
    import subprocess

    p = editor.work / "proj"
    (p / "build" / "obj").mkdir(parents=True)
    (p / "build" / "obj" / "a.o").write_bytes(b"\x7fELF object")
    (p / "node_modules" / "pkg").mkdir(parents=True)
    for i in range(20):
        (p / "node_modules" / "pkg" / f"m{i}.js").write_text("x" * 1000)
    (p / ".gitignore").write_text("build/\nnode_modules/\n")
    (p / "src.txt").write_text("source\n")
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    editor.run_sync({"cmd": "true", "cwd": str(p)})
    return p


def check(editor, cmd, cwd):
    return editor.lua("return require('run_bash').check(...)", cmd, {"cwd": str(cwd)})


@pytest.mark.parametrize("backend", ["sandlock", "bubblewrap"])
def test_reversible_commands_that_undo_covers_do_not_ask(editor, backend):
    from tests.integration.test_undo import available

    if not available(backend):
        pytest.skip(f"{backend} is not available here")
    editor.lua(
        "require('run_bash').setup(...)",
        {"sandbox": {"backend": backend}, "undo": {"ignored_total": "8K"}},
    )
    p = project(editor)
    a = check(editor, "rm -rf build", p)
    assert a["needs_approval"] is False and a["undoable"] is True
    assert [h["effect"] for h in a["hits"]] == ["reversible"]
    # Irreversible: asks, and says which class.
    b = check(editor, "git push --force origin main", p)
    assert b["needs_approval"] is True and b["effect"] == "irreversible"
    # Reversible, but undo does not keep what it names: asks, and says why.
    c = check(editor, "rm -rf node_modules", p)
    assert c["needs_approval"] is True and c["effect"] == "reversible"
    assert "node_modules" in c["undo_why"] and "over undo.ignored_total" in c["undo_why"]
    d = check(editor, "rm -rf /tmp/elsewhere", p)
    assert d["needs_approval"] is True and "outside the project" in d["undo_why"]
    # A line that can make a target name something else first (a symlink, content moved into
    # it): only when everything the run can write is covered, which .git never is.
    for line in ("ln -s .git x; rm -rf x/*", "mv docs build/; rm -rf build"):
        e = check(editor, line, p)
        assert e["needs_approval"] is True and ".git" in e["undo_why"], (line, e)
    # Moving git's own data away is a write into .git, which undo never takes back: it is
    # irreversible whatever follows.
    e = check(editor, "mv .git/objects build/; rm -rf build", p)
    assert e["needs_approval"] is True and e["effect"] == "irreversible", e
    assert "writes into git's own data (`.git/objects`)" in e["reason"], e
    # Run it: no window, the result says so and how to undo, and undo brings build/ back.
    r = editor.run_sync({"cmd": "rm -rf build", "cwd": str(p)})
    assert floats(editor) == []
    assert r["exit_code"] == 0 and not (p / "build").exists()
    assert any("ran without asking" in n for n in r["notices"])
    assert r["changes"]["undo"] == f":RunBashUndo {r['id']}"
    done = editor.lua("local d, e = require('run_bash').undo(...); return d or e", r["id"])
    assert done["restored"] == ["build", "build/obj", "build/obj/a.o"], done
    assert (p / "build" / "obj" / "a.o").read_bytes() == b"\x7fELF object"


def test_the_opt_out_asks_again_and_the_window_shows_each_class(editor):
    from tests.integration.test_undo import first_available

    backend = first_available()
    if backend == "none":
        pytest.skip("no confining backend here")
    editor.lua(
        "require('run_bash').setup(...)",
        {"sandbox": {"backend": backend}, "pauselist": {"ask_reversible": True}},
    )
    p = project(editor)
    a = check(editor, "rm -rf build", p)
    assert a["needs_approval"] is True and "ask_reversible" in a["undo_why"]
    editor.nvim.command(f"cd {p}")
    editor.nvim.command("RunBash kill -9 999999; rm -rf build")
    text = wait_for(lambda: floats(editor))[0]
    assert "2 reasons to pause" in text
    assert "[irreversible]" in text and "[reversible]" in text
    editor.nvim.input("q")
    wait_for(lambda: floats(editor) == [])
    assert (p / "build").exists()


def test_what_changed_between_the_answer_and_the_start_asks_after_all(editor):
    """The gate's answer is checked again on the snapshot taken just before the run starts: a
    big file appearing under the target in between makes the run wait for the user."""
    from tests.integration.test_undo import first_available

    backend = first_available()
    if backend == "none":
        pytest.skip("no confining backend here")
    editor.lua(
        "require('run_bash').setup(...)",
        {"sandbox": {"backend": backend}, "undo": {"ignored_file_max": "4K"}},
    )
    p = project(editor)
    a = check(editor, "rm -rf build", p)
    assert a["needs_approval"] is False
    # build/ is ignored: a file in it over undo.ignored_file_max is one undo cannot keep.
    (p / "build" / "huge.bin").write_bytes(os.urandom(10_000))
    editor.lua(
        "_G.__res = nil; require('run_bash').run({ cmd = 'rm -rf build', cwd = ..., "
        "decision_id = select(2, ...) }, function(r) _G.__res = r end)",
        str(p),
        a["decision_id"],
    )
    text = wait_for(lambda: floats(editor))[0]
    assert "undo cannot take it all back now" in text and "huge.bin" in text
    editor.nvim.input("q")
    wait_for(lambda: editor.lua("return _G.__res"))
    assert (p / "build" / "huge.bin").exists()
