"""The CodeCompanion tool table (lua/run_bash/tool.lua) driven by a small stand-in orchestrator.

The stand-in calls the table the way CodeCompanion's orchestrator does (deep copy per call, opts merge,
``require_approval_before(tool, tools)``, ``cmds[1](tools, args, {output_cb, register_job})``, output
handlers that must call ``chat:add_tool_output`` themselves, one ``stderr`` list per round), without
CodeCompanion installed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for

pytestmark = pytest.mark.nvim

STAND_IN = r"""
_G.fake = { calls = {}, stderr = {}, jobs = {} }

-- One tool call, the way CodeCompanion runs it. `how`: { decision = "accept"|"always"|"reject"|"cancel",
-- reason = string, bufnr = number, new_round = bool, skip_gate = bool }
function fake.call(args, how)
  how = how or {}
  if how.new_round then fake.stderr = {} end
  local tool_mod = require("run_bash.tool")
  local cfg = tool_mod.config_entry()
  local resolved = cfg.callback()
  local tool = vim.deepcopy(resolved)
  local n = #fake.calls + 1
  tool.name = "run_bash"
  tool.function_call = { id = "call_" .. n, type = "function",
    ["function"] = { name = "run_bash", arguments = vim.json.encode(args) } }
  tool.args = args
  tool.opts = vim.tbl_extend("force", tool.opts or {}, cfg.opts or {})
  local rec = { n = n, outputs = {}, cb_count = 0, done = false }
  fake.calls[n] = rec
  local chat = {}
  function chat:add_tool_output(t, for_llm, for_user)
    assert(t.function_call and t.function_call.id, "add_tool_output without function_call.id")
    table.insert(rec.outputs, { llm = for_llm, user = for_user })
  end
  local tools = { chat = chat, bufnr = how.bufnr or 0, stderr = fake.stderr, stdout = {}, tool = tool }
  local meta = { tools = tools }
  rec.key = tool.output.cmd_string(tool, meta)
  local need = false
  if not how.skip_gate then
    need = tool.opts.require_approval_before(tool, tools)
  end
  rec.asked = need
  if need then
    rec.prompt = tool.output.prompt(tool, meta)
    local d = how.decision or "accept"
    if d == "reject" then
      tool.output.rejected(tool, { tools = tools, opts = { reason = how.reason } })
      rec.done = true
      return n
    elseif d == "cancel" then
      tool.output.cancelled(tool, meta)
      rec.done = true
      return n
    elseif d == "always" then
      rec.always_key = tool.output.cmd_string(tool, meta)
    end
  end
  local returned_yet = false
  local tool_output = {}
  local function output_cb(msg)
    rec.cb_count = rec.cb_count + 1
    if rec.cb_count > 1 then return end
    rec.sync = not returned_yet
    rec.status = msg.status
    if msg.status == "error" then
      table.insert(tools.stderr, msg.data)
      tool.output.error(tool, tools.stderr, meta)
    else
      table.insert(tool_output, msg.data)
      tool.output.success(tool, tool_output, meta)
    end
    rec.done = true
  end
  local ok, ret = pcall(tool.cmds[1], tools, tool.args, {
    output_cb = output_cb,
    register_job = function(job) fake.jobs[n] = job; rec.has_job = true end,
  })
  returned_yet = true
  rec.returned = ret ~= nil
  if not ok then
    rec.lua_error = tostring(ret)
    table.insert(tools.stderr, ret)
    tool.output.error(tool, tools.stderr, meta)
    rec.done = true
  end
  return n
end

function fake.get(n)
  return fake.calls[n]
end
"""


class Tool:
    def __init__(self, editor: Any) -> None:
        self.ed = editor
        editor.lua(STAND_IN)

    def setup(self, opts: dict[str, Any] | None = None, lua: str | None = None) -> None:
        if lua:
            self.ed.lua(f"require('run_bash').setup({lua})")
        else:
            self.ed.lua("require('run_bash').setup(...)", opts or {})

    def start(self, args: dict[str, Any], **how: Any) -> int:
        return self.ed.lua("return fake.call(...)", args, how)

    def call(self, args: dict[str, Any], timeout: float = 10, **how: Any) -> dict[str, Any]:
        n = self.start(args, **how)
        rec = wait_for(
            lambda: (r := self.ed.lua("return fake.get(...)", n)) and r["done"] and r, timeout
        )
        # Exactly once, never synchronously: callbacks scheduled before this tick have run.
        self.ed.lua("_G.__tick = false; vim.schedule(function() _G.__tick = true end)")
        wait_for(lambda: self.ed.lua("return _G.__tick"))
        rec = self.ed.lua("return fake.get(...)", n)
        if "lua_error" not in rec and rec.get("asked") is not None and rec.get("status"):
            assert rec["cb_count"] == 1
            assert rec["sync"] is False
            assert rec["returned"] is False
        assert len(rec["outputs"]) == 1, rec
        rec["llm"] = rec["outputs"][0]["llm"]
        rec["user"] = rec["outputs"][0]["user"]
        return rec

    def sandboxed(self) -> bool:
        return bool(self.ed.lua("local f = require('run_bash').facts(); return f and f.sandboxed"))

    def audit(self) -> list[dict[str, Any]]:
        path = Path(self.ed.lua("return require('run_bash.audit_log').path()"))
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stub_check(self, answer: dict[str, Any] | None, error: str | None = None) -> None:
        """Replace the gate's answer (keeps the approval tests independent of the checker)."""
        self.ed.lua(
            """
            local answer, err = ...
            local rb = require('run_bash')
            _G.__real_check = _G.__real_check or rb.check
            rb.check = function(cmd, opts)
              if err ~= vim.NIL and err ~= nil then return nil, err end
              local v = vim.deepcopy(answer)
              v.cmd = cmd
              if opts and opts.skip_sandbox then
                v.sandboxed = false; v.backend = 'none'; v.needs_approval = true; v.skip_sandbox = true
              end
              return v
            end
            """,
            answer,
            error,
        )


@pytest.fixture
def tool(editor: Any) -> Tool:
    return Tool(editor)


@pytest.fixture
def nosandbox(tool: Tool) -> Tool:
    tool.setup({"sandbox": {"backend": "none"}})
    return tool


SAFE = {
    "needs_approval": False,
    "decision_id": "d1",
    "pause": False,
    "sandboxed": True,
    "backend": "sandlock",
    "reason": "no rule",
    "rule": None,
}
PAUSED = {
    "needs_approval": True,
    "decision_id": "d2",
    "pause": True,
    "sandboxed": True,
    "backend": "sandlock",
    "reason": "`git push --force` rewrites remote history",
    "rule": "git",
    "command": "git push --force",
}


# -- shape --------------------------------------------------------------------------------------------

FACTS = {
    "backend": "sandlock",
    "sandboxed": True,
    "unavailable": "",
    "default_timeout": 300,
    "max_timeout": 3600,
    "max_bg_after": 60,
}


def test_schema_is_compatible_with_the_original(tool: Tool) -> None:
    schema = tool.ed.lua("return require('run_bash.tool_schema').schema(...)", FACTS)
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "run_bash"
    params = fn["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == []
    props = params["properties"]
    assert props["cmd"]["type"] == "string"
    assert props["action"]["enum"] == ["run", "kill", "output", "list", "wait"]
    assert props["session_id"]["type"] == "string"
    assert props["bg_after"]["type"] == "integer" and "60" in props["bg_after"]["description"]
    assert props["timeout"]["type"] == "integer"
    assert "300" in props["timeout"]["description"] and "3600" in props["timeout"]["description"]
    assert props["tail"]["type"] == "integer"
    assert props["skip_sandbox"]["type"] == "boolean"
    desc = fn["description"]
    for rule in (
        "bg_after",
        "NEVER use `&`",
        "Kill every background session",
        "authentication",
        "Permission denied",
        '"skip_sandbox": true',
        "sandlock",
    ):
        assert rule in desc, rule


def test_skip_sandbox_is_offered_only_with_a_sandbox(tool: Tool) -> None:
    none = {**FACTS, "sandboxed": False, "backend": "none"}
    schema = tool.ed.lua("return require('run_bash.tool_schema').schema(...)", none)
    assert "skip_sandbox" not in schema["function"]["parameters"]["properties"]
    assert "every command asks the user" in schema["function"]["description"]
    why = tool.ed.lua(
        "return require('run_bash.tool_schema').schema(...)['function'].description",
        {**none, "unavailable": "bubblewrap unavailable: bwrap not found"},
    )
    assert "No sandbox is available (bubblewrap unavailable: bwrap not found)" in why
    tool.setup({"sandbox": {"backend": "none"}})
    created = tool.ed.lua("return require('run_bash.tool').create().schema")
    assert "skip_sandbox" not in created["function"]["parameters"]["properties"]


def test_config_entry_opts(tool: Tool) -> None:
    entry = tool.ed.lua(
        """
        local e = require('run_bash.tool').config_entry()
        local t = e.callback()
        return { opts = { rcmd = e.opts.require_cmd_approval, yolo = e.opts.allowed_in_yolo_mode,
                          gate = type(e.opts.require_approval_before) },
                 cb = type(e.callback), cmds = #t.cmds, cmd_string = type(t.output.cmd_string),
                 handlers = vim.tbl_keys(t.output), desc = e.description }
        """
    )
    assert entry["opts"] == {"rcmd": True, "yolo": False, "gate": "function"}
    assert entry["cmds"] == 1 and entry["cmd_string"] == "function"
    assert {"success", "error", "rejected", "prompt", "cmd_string"} <= set(entry["handlers"])
    assert entry["desc"]


# -- approval ------------------------------------------------------------------------------------------


def test_safe_sandboxed_command_runs_without_asking(tool: Tool) -> None:
    tool.stub_check(SAFE)
    tool.ed.lua(
        "require('run_bash').run = function(spec, cb) _G.__spec = spec; cb({ id='x1', status='exited',"
        " exit_code=0, output='ok\\n', sandboxed=true, backend='sandlock', duration_s=0.01 })"
        " return { id = 'x1' } end"
    )
    rec = tool.call({"cmd": "ls"})
    assert rec["asked"] is False
    assert rec["llm"].startswith("Success.\nSandbox active.")
    spec = tool.ed.lua("return _G.__spec")
    # The run starts on the gate's answer; nobody was asked, so there is no consent in it.
    assert spec["cmd"] == "ls" and spec["decision_id"] == "d1" and spec["source"] == "agent"
    assert "approved" not in spec and "unsandboxed_ok" not in spec


def test_paused_command_asks_with_reason_and_runs_in_the_sandbox(tool: Tool) -> None:
    tool.stub_check(PAUSED)
    tool.ed.lua(
        "require('run_bash').run = function(spec, cb) _G.__spec = spec; cb({ id='x2', status='exited',"
        " exit_code=0, output='', sandboxed=true, backend='sandlock' }) return { id = 'x2' } end"
    )
    rec = tool.call({"cmd": "git push --force"})
    assert rec["asked"] is True
    assert "IN sandbox" in rec["prompt"] and "git push --force" in rec["prompt"]
    assert "Paused: `git push --force` rewrites remote history (rule: git)" in rec["prompt"]
    spec = tool.ed.lua("return _G.__spec")
    assert spec["approved"] is True and spec["unsandboxed_ok"] is False
    assert spec["answer"] == "accept" and spec["decision_id"] == "d2"
    assert (
        rec["llm"]
        == "Success.\n"
        + tool.ed.lua("return require('run_bash.tool_format').SANDBOX_NOTE")
        + "\nOutput:\n\n(no output)"
    )


@pytest.mark.parametrize(
    "args",
    [
        {"action": "kill", "session_id": "abc"},
        {"action": "output", "session_id": "abc"},
        {"action": "list"},
    ],
)
def test_kill_output_list_never_ask(tool: Tool, args: dict[str, Any]) -> None:
    tool.stub_check(PAUSED)
    rec = tool.call(args)
    assert rec["asked"] is False


def test_skip_sandbox_always_asks_and_runs_unsandboxed(tool: Tool) -> None:
    tool.stub_check(SAFE)
    tool.ed.lua(
        "require('run_bash').run = function(spec, cb) _G.__spec = spec; cb({ id='x3', status='exited',"
        " exit_code=0, output='hi', sandboxed=false, backend='none' }) return { id = 'x3' } end"
    )
    rec = tool.call({"cmd": "ls", "skip_sandbox": True})
    assert rec["asked"] is True
    assert "WITHOUT sandbox" in rec["prompt"] and "skip_sandbox" in rec["prompt"]
    assert rec["key"] == "[no sandbox] ls"
    spec = tool.ed.lua("return _G.__spec")
    assert spec["unsandboxed_ok"] is True and spec["skip_sandbox"] is True
    assert "Sandbox active" not in rec["llm"]


def test_without_a_sandbox_every_command_asks(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo hello"})
    assert rec["asked"] is True
    assert "WITHOUT sandbox" in rec["prompt"] and '"none"' in rec["prompt"]
    assert rec["llm"] == "Success.\nOutput:\n\nhello\n"
    assert rec["key"] == "[no sandbox] echo hello"


def test_unavailable_sandbox_says_why(tool: Tool) -> None:
    tool.stub_check(
        {
            **SAFE,
            "needs_approval": True,
            "sandboxed": False,
            "backend": "none",
            "unavailable": "sandlock unavailable: not installed",
        }
    )
    tool.ed.lua(
        "require('run_bash').run = function(spec, cb) cb({ error = 'stop here' }) return { id = 'x' } end"
    )
    rec = tool.call({"cmd": "ls"}, decision="accept")
    assert rec["asked"] is True
    assert "No sandbox: sandlock unavailable: not installed" in rec["prompt"]


def test_check_failure_runs_nothing_and_names_the_cause(tool: Tool) -> None:
    tool.stub_check(None, error="the Python host did not start (python9): boom")
    tool.ed.lua("require('run_bash').run = function() error('must not run') end")
    rec = tool.call({"cmd": "ls"})
    assert rec["asked"] is False
    assert rec["status"] == "error"
    assert (
        rec["llm"]
        == "Error: could not check the command: the Python host did not start (python9): boom"
    )


def test_real_checker_decisions_in_the_sandbox(tool: Tool) -> None:
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    gate = tool.ed.lua(
        """
        local t = require('run_bash.tool')
        local function ask(args) local tl = { args = args }; return t.needs_approval(tl, {}) end
        return { ask({ cmd = 'ls -la' }), ask({ cmd = 'rm -rf build' }), ask({ cmd = 'ls', skip_sandbox = true }),
                 ask({ cmd = 'echo "rm -rf /"' }), ask({ action = 'kill', session_id = 'x' }) }
        """
    )
    assert gate == [False, True, True, False, False]


def test_the_tool_asks_only_about_what_undo_cannot_take_back(tool: Tool) -> None:
    """Effects, not text: in a project whose undo covers `build/`, the tool does not ask before
    `rm -rf build`; it asks before a signal, a mix of both, and again with the opt-out."""
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    work = tool.ed.work
    (work / "package.json").write_text("{}\n")
    (work / "build").mkdir()
    (work / "build" / "out.js").write_text("built\n")
    tool.ed.run_sync({"cmd": "true", "cwd": str(work)})  # the project's undo index
    ask = """
        local t = require('run_bash.tool')
        local out = {}
        for _, cmd in ipairs(...) do
          table.insert(out, t.needs_approval({ args = { cmd = cmd } }, {}))
        end
        return out
        """
    cmds = ["rm -rf build", "kill -9 999999", "rm -rf build; kill -9 999999"]
    assert tool.ed.lua(ask, cmds) == [False, True, True]
    tool.setup(lua="{ pauselist = { ask_reversible = true } }")
    tool.ed.run_sync({"cmd": "true", "cwd": str(work)})
    assert tool.ed.lua(ask, cmds) == [True, True, True]


def test_lua_function_pause_rule_is_honoured(tool: Tool) -> None:
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    tool.setup(
        lua="{ pauselist = { cargo = true, rm = false, git = function(args) return args[1] == 'reset' end } }"
    )
    gate = tool.ed.lua(
        """
        local t = require('run_bash.tool')
        local function ask(cmd) return t.needs_approval({ args = { cmd = cmd } }, {}) end
        return { ask('git reset HEAD~1'), ask('git status'), ask('cargo build'), ask('rm -rf build') }
        """
    )
    assert gate == [True, False, True, False]


def test_lua_rule_matching_is_the_checkers(tool: Tool) -> None:
    """A Lua rule for `git` judges `git` commands only, with their own arguments: `gitk --all`
    never reaches it, and `git status; gitk --all` does not blame it for `gitk`."""
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    tool.setup(lua="{ pauselist = { git = function(a) return a[1] == '--all' end } }")
    answers = tool.ed.lua(
        """
        local rb = require('run_bash')
        local out = {}
        for _, cmd in ipairs({ 'gitk --all', 'git status; gitk --all', 'git --all', 'gitk; git --all' }) do
          local a = assert(rb.check(cmd))
          table.insert(out, { a.needs_approval, a.rule, a.command })
        end
        return out
        """
    )
    assert answers == [
        [False, None, None],
        [False, None, None],
        [True, "git", "git --all"],
        [True, "git", "git --all"],
    ]


def test_a_lua_rule_that_raises_pauses(tool: Tool) -> None:
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    tool.setup(lua="{ pauselist = { make = function() error('rule bug') end } }")
    a = tool.ed.lua("return require('run_bash').check('make test')")
    assert a["needs_approval"] is True and a["rule"] == "make"
    assert "your pause-list rule for make failed" in a["reason"] and "rule bug" in a["reason"]
    # Control: a command the rule is not asked about runs without asking.
    assert tool.ed.lua("return require('run_bash').check('ls').needs_approval") is False


def test_rejection_reaches_the_agent_and_the_audit_log(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo nope"}, decision="reject", reason="not now")
    assert rec["llm"] == "User rejected: not now"
    rec = nosandbox.call({"cmd": "echo nope"}, decision="reject")
    assert rec["llm"] == "User rejected: no reason given"
    # The rejection reaches the host as a notification: its lines are written soon after.
    wait_for(lambda: len([r for r in nosandbox.audit() if r["event"] == "run"]) == 2)
    decisions = [r for r in nosandbox.audit() if r["event"] == "decision"]
    assert [d["decided_by"] for d in decisions] == ["user_reject", "user_reject"]
    assert decisions[0]["user_reason"] == "not now" and decisions[0]["source"] == "agent"
    # Nothing ran: each has one run line that says so, joined to its decision.
    runs = [r for r in nosandbox.audit() if r["event"] == "run"]
    assert [r["status"] for r in runs] == ["rejected", "rejected"]
    assert [r["id"] for r in runs] == [d["session_id"] for d in decisions]


def test_decisions_are_audited(nosandbox: Tool) -> None:
    nosandbox.call({"cmd": "echo a"}, decision="accept")
    nosandbox.call({"cmd": "echo b"}, decision="always")

    def both_runs() -> list[dict[str, Any]] | None:
        # A run's line follows its result (written at once after it is sent).
        log = nosandbox.audit()
        return log if sum(r["event"] == "run" for r in log) == 2 else None

    log = wait_for(both_runs)
    decisions = [(r["cmd"], r["decided_by"]) for r in log if r["event"] == "decision"]
    assert decisions == [("echo a", "user_accept"), ("echo b", "user_always")]
    assert sorted(r["cmd"] for r in log if r["event"] == "run") == ["echo a", "echo b"]


def test_auto_decision_is_audited(tool: Tool) -> None:
    if not tool.sandboxed():
        pytest.skip("the default sandbox backend is not available here")
    rec = tool.call({"cmd": "echo boxed"})
    assert rec["asked"] is False
    assert rec["llm"].startswith("Success.\nSandbox active.") and rec["llm"].endswith("boxed\n")
    decisions = [r for r in tool.audit() if r["event"] == "decision"]
    assert decisions and decisions[0]["decided_by"] == "auto" and decisions[0]["sandboxed"] is True


def test_cached_always_accept_runs_only_what_was_accepted(nosandbox: Tool) -> None:
    """When CodeCompanion skips the gate (an "Always accept" in its cache), cmds[1] checks the cache."""
    nosandbox.ed.lua(
        """
        package.loaded['codecompanion.interactions.chat.tools.approvals'] = {
          is_approved = function(_, bufnr, a) return a.cmd == '[no sandbox] echo cached' end }
        """
    )
    rec = nosandbox.call({"cmd": "echo cached"}, skip_gate=True)
    assert rec["status"] == "success" and rec["llm"].endswith("cached\n")
    rec = nosandbox.call({"cmd": "echo other"}, skip_gate=True)
    assert rec["status"] == "error"
    assert "needs the user's approval" in rec["llm"]
    decisions = [r["decided_by"] for r in nosandbox.audit() if r["event"] == "decision"]
    assert decisions == ["user_always_cached"]


def test_unsandboxed_run_without_approval_is_refused(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo never"}, skip_gate=True)
    assert rec["status"] == "error" and "approval" in rec["llm"]
    assert not [r for r in nosandbox.audit() if r["event"] == "run"]


# -- runs ------------------------------------------------------------------------------------------------


def test_failure_reports_exit_code(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo oops >&2; exit 3"})
    assert rec["status"] == "error"
    assert rec["llm"] == "Failed (exit: 3).\nOutput:\n\noops\n"
    assert "exit 3" in rec["user"] and "oops" in rec["user"]
    assert "`echo oops >&2; exit 3`" in rec["user"]


def test_timeout_is_reported(nosandbox: Tool) -> None:
    t0 = time.monotonic()
    rec = nosandbox.call({"cmd": "echo started; sleep 20", "timeout": 1})
    assert time.monotonic() - t0 < 6
    assert rec["status"] == "error"
    assert "(timed out)." in rec["llm"].splitlines()[0]
    assert rec["llm"].startswith("Failed (exit: ")
    assert rec["llm"].endswith("started\n")


def test_background_session_output_and_kill(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo ready; sleep 0.5; echo later; sleep 60", "bg_after": 0.2})
    assert rec["status"] == "success"
    llm = rec["llm"]
    assert llm.startswith("Background command started.\n")
    sid = llm.split("Session ID: ")[1].split("\n")[0]
    assert f'Kill with: {{"action": "kill", "session_id": "{sid}"}}' in llm
    assert "Output file: " in llm and llm.endswith("Partial output:\n\nready\n")
    out_file = Path(llm.split("Output file: ")[1].split("\n")[0])
    wait_for(lambda: "later" in out_file.read_text(), 5)
    out = nosandbox.call({"action": "output", "session_id": sid})
    assert out["status"] == "success"
    assert out["llm"].startswith(f"Session {sid}: still running.")
    assert out["llm"].endswith("New output since the last read:\n\nlater\n")
    again = nosandbox.call({"action": "output", "session_id": sid})
    assert again["llm"].endswith("(no new output)")
    tail = nosandbox.call({"action": "output", "session_id": sid, "tail": 1})
    assert tail["llm"].endswith("Last 1 line(s):\n\nlater\n")
    listed = nosandbox.call({"action": "list"})
    assert f"- {sid}: running in the background" in listed["llm"]
    killed = nosandbox.call({"action": "kill", "session_id": sid})
    assert killed["status"] == "success"
    assert killed["llm"].startswith(f"Killed background session {sid} (PID ")
    assert "Output file preserved at: " in killed["llm"]
    again = nosandbox.call({"action": "kill", "session_id": sid})
    assert again["llm"].startswith(f"Session {sid} already exited")


def test_background_command_that_ends_early(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "echo quick", "bg_after": 5})
    assert rec["status"] == "success"
    assert rec["llm"].startswith("Success.\nSession ID: ")
    assert rec["llm"].endswith("Output:\n\nquick\n")


def test_left_behind_processes_are_reported(nosandbox: Tool) -> None:
    rec = nosandbox.call({"cmd": "sleep 30 & echo started"})
    assert rec["status"] == "success"
    assert "were stopped; use `bg_after`" in rec["llm"]


def test_register_job_kills_the_whole_run(nosandbox: Tool) -> None:
    n = nosandbox.start({"cmd": "sleep 30; echo never", "bg_after": 0})
    wait_for(lambda: nosandbox.ed.lua("return fake.get(...).has_job", n))
    # Killed once it runs (its project is snapshotted first; a kill before that starts nothing).
    sid = nosandbox.ed.lua("return fake.jobs[...].id", n)
    wait_for(
        lambda: nosandbox.ed.lua(
            "local s = require('run_bash').sessions[...]; return s and s.pid", sid
        )
    )
    t0 = time.monotonic()
    nosandbox.ed.lua("fake.jobs[...]:kill('sigterm')", n)
    rec = wait_for(
        lambda: (r := nosandbox.ed.lua("return fake.get(...)", n)) and r["done"] and r, 8
    )
    assert time.monotonic() - t0 < 5
    assert rec["status"] == "error"
    assert "Note: the command was killed." in rec["outputs"][0]["llm"]


def test_host_dying_mid_run_fails_the_call(nosandbox: Tool) -> None:
    import psutil

    n = nosandbox.start({"cmd": "sleep 30"})
    wait_for(lambda: nosandbox.ed.lua("return fake.get(...).has_job", n))
    job = nosandbox.ed.lua("return require('run_bash')._job()")
    keeper = psutil.Process(nosandbox.ed.nvim.funcs.jobpid(job))
    keeper.children()[0].kill()
    rec = wait_for(
        lambda: (r := nosandbox.ed.lua("return fake.get(...)", n)) and r["done"] and r, 8
    )
    assert rec["status"] == "error"
    assert rec["outputs"][0]["llm"].startswith("Error: the Python host exited")


def test_host_that_cannot_start_gives_an_error(tool: Tool) -> None:
    tool.ed.lua("vim.g.run_bash_python = '/nonexistent/python3'")
    rec = tool.call({"cmd": "ls"})
    assert rec["status"] == "error"
    assert "Python not found: /nonexistent/python3" in rec["llm"]


# -- bad arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, '`cmd` is required for action "run"'),
        ({"cmd": "   "}, '`cmd` is required for action "run"'),
        ({"cmd": 5}, "`cmd` should be a string"),
        ({"action": "explode"}, 'unknown action "explode"'),
        ({"cmd": "ls", "bg_after": 61}, "`bg_after` cannot exceed 60 seconds"),
        ({"cmd": "ls", "bg_after": -1}, "`bg_after` must be 0 (foreground) or 1..60 seconds"),
        ({"cmd": "ls", "timeout": 0}, "`timeout` must be 1..3600 seconds"),
        ({"cmd": "ls", "timeout": 3601}, "`timeout` must be 1..3600 seconds"),
        ({"cmd": "ls", "timeout": "soon"}, "`timeout` should be a number of seconds"),
        ({"cmd": "ls", "skip_sandbox": "yes"}, "`skip_sandbox` should be true or false"),
        ({"action": "kill"}, '`session_id` is required for action "kill"'),
        ({"action": "output", "session_id": "abc", "tail": 0}, "`tail` should be a positive"),
        ({"action": "kill", "session_id": "zzzzzz"}, "unknown session id 'zzzzzz'"),
        ({"action": "output", "session_id": "zzzzzz"}, "unknown session id 'zzzzzz'"),
        ({"cmd": "echo " + "a " * 500_000}, "the limit is 100000"),
        ({"cmd": "echo a\0b"}, "`cmd` contains a NUL byte"),
    ],
)
def test_bad_arguments_give_one_clear_error(tool: Tool, args: dict[str, Any], message: str) -> None:
    tool.ed.lua("require('run_bash').run = function() error('must not run') end")
    rec = tool.call(args)
    assert rec["asked"] is False
    assert rec["status"] == "error"
    assert rec["llm"].startswith("Error: ") and message in rec["llm"], rec["llm"]
    assert "\n" not in rec["llm"]


def test_null_arguments_count_as_absent(nosandbox: Tool) -> None:
    nosandbox.ed.lua(
        '_G.__args = vim.json.decode(\'{"cmd": "echo x", "session_id": null, "timeout": null}\')'
    )
    n = nosandbox.ed.lua("return fake.call(_G.__args)")
    rec = wait_for(lambda: (r := nosandbox.ed.lua("return fake.get(...)", n)) and r["done"] and r)
    assert rec["status"] == "success"


def test_error_handler_reports_the_last_error_of_the_round(tool: Tool) -> None:
    tool.ed.lua("require('run_bash').run = function() error('must not run') end")
    first = tool.call({"cmd": "ls", "timeout": 0}, new_round=True)
    second = tool.call({"action": "frobnicate"})
    assert "`timeout`" in first["llm"]
    assert 'unknown action "frobnicate"' in second["llm"] and "timeout" not in second["llm"]
    assert tool.ed.lua("return #fake.stderr") == 2


def test_lua_error_in_cmds_is_reported(tool: Tool) -> None:
    tool.ed.lua("require('run_bash.tool').execute = function() error('boom') end")
    tool.stub_check(SAFE)
    rec = tool.call({"cmd": "ls"})
    assert rec["llm"].startswith("Error: ") and rec["llm"].endswith("boom")


# -- text ------------------------------------------------------------------------------------------------


def test_format_markers(tool: Tool) -> None:
    fmt = tool.ed.lua(
        """
        local t = require('run_bash.tool_format')
        local base = { id = 'abc123', cmd = 'make', status = 'exited', exit_code = 0, sandboxed = true,
                       backend = 'sandlock', output = 'done\\n', duration_s = 0.5, output_file = '/tmp/o',
                       output_bytes = 5, leftovers = 0, notices = {} }
        local function run(over) return (t.format({ action = 'run', result = vim.tbl_extend('force', base, over) })) end
        return {
          ok = run({}),
          fail = run({ exit_code = 2 }),
          timed = run({ status = 'timed_out', exit_code = vim.NIL, signal = 15, timed_out = true }),
          trunc = run({ truncated = true, output_bytes = 99999 }),
          notice = run({ sandboxed = false, backend = 'none', notices = { 'sandlock unavailable: x' } }),
          bg = run({ status = 'running', background = true }),
        }
        """
    )
    note = 'Sandbox active. If result suggests sandbox interference, retry with `"skip_sandbox": true`.'
    assert fmt["ok"] == f"Success.\n{note}\nOutput:\n\ndone\n"
    assert fmt["fail"] == f"Failed (exit: 2).\n{note}\nOutput:\n\ndone\n"
    assert fmt["timed"].startswith(f"Failed (exit: 143) (timed out).\n{note}\n")
    assert "Output file: /tmp/o" in fmt["trunc"] and "99999 bytes" in fmt["trunc"]
    assert fmt["notice"] == "Success.\nNote: sandlock unavailable: x\nOutput:\n\ndone\n"
    assert fmt["bg"].startswith(
        f"Background command started.\n{note}\nSession ID: abc123\nOutput file: /tmp/o\n"
    )


def test_the_change_set_line_follows_the_output(tool: Tool) -> None:
    """One line after the output, separated by an empty line; the rest is the original text."""
    fmt = tool.ed.lua(
        """
        local t = require('run_bash.tool_format')
        local ch = { summary = 'Changed files: M src/app.py, A notes.md', paths = {}, counts = {} }
        local base = { id = 'abc123', cmd = 'make', status = 'exited', exit_code = 0, sandboxed = false,
                       backend = 'none', output = 'done\\n', duration_s = 0.5, notices = {} }
        local function f(action, over, key)
          return (t.format({ action = action, [key or 'result'] = vim.tbl_extend('force', base, over) }))
        end
        return {
          ok = f('run', { changes = ch }),
          none = f('run', { changes = ch, output = '' }),
          fail = f('run', { changes = ch, exit_code = 1 }),
          empty = f('run', { changes = { summary = '', paths = {}, counts = {} } }),
          unrecorded = f('run', { changes = { not_recorded = 'the project would be /' } }),
          kill = f('kill', { changes = ch, status = 'killed', killed = true, pid = 7 }),
          ended = f('output', { changes = ch }, 'info'),
          running = f('output', { changes = ch, status = 'running' }, 'info'),
        }
        """
    )
    line = "Changed files: M src/app.py, A notes.md"
    assert fmt["ok"] == f"Success.\nOutput:\n\ndone\n\n{line}"
    assert fmt["none"] == f"Success.\nOutput:\n\n(no output)\n\n{line}"
    assert fmt["fail"] == f"Failed (exit: 1).\nOutput:\n\ndone\n\n{line}"
    assert fmt["empty"] == fmt["unrecorded"] == "Success.\nOutput:\n\ndone\n"
    assert fmt["kill"].startswith("Killed background session abc123 (PID 7).")
    assert fmt["kill"].endswith(f"\n\n{line}") and fmt["ended"].endswith(f"\n\n{line}")
    assert "Changed files" not in fmt["running"]


def test_an_agent_run_reports_what_it_changed_unless_undo_is_off(nosandbox: Tool) -> None:
    # Outside a project nothing is recorded, and the agent is not told (there is nothing there
    # to protect); the result's `changes` says why.
    rec = nosandbox.call({"cmd": "echo loose > loose.txt"})
    assert rec["llm"] == "Success.\nOutput:\n\n(no output)"
    (nosandbox.ed.work / "package.json").write_text("{}\n")  # the working directory: a project
    rec = nosandbox.call({"cmd": "echo made > made.txt"})
    assert rec["llm"].startswith("Success.\n")
    assert rec["llm"].endswith("Output:\n\n(no output)\n\nChanged files: A made.txt"), rec["llm"]
    assert rec["user"].endswith("\n\nChanged files: A made.txt")
    nosandbox.setup({"sandbox": {"backend": "none"}, "undo": {"enabled": False}})
    rec = nosandbox.call({"cmd": "echo again > made2.txt"})
    assert rec["llm"] == "Success.\nOutput:\n\n(no output)"


def test_end_of_session_notices_reach_output_list_and_kill(tool: Tool) -> None:
    """A restore reported when a background session ended is shown by every later action."""
    fmt = tool.ed.lua(
        """
        local t = require('run_bash.tool_format')
        local note = 'protected file .git/config was changed and has been restored'
        local s = { id = 'abc123', cmd = 'x', status = 'killed', killed = true, signal = 9,
                    sandboxed = true, backend = 'sandlock', output = '', output_file = '/tmp/o',
                    notices = { note } }
        return {
          output = (t.format({ action = 'output', info = s })),
          running = (t.format({ action = 'output', info = vim.tbl_extend('force', s, { status = 'running' }) })),
          list = (t.format({ action = 'list', sessions = { s } })),
          kill = (t.format({ action = 'kill', result = vim.tbl_extend('force', s, { already_ended = true }) })),
        }
        """
    )
    note = "Note: protected file .git/config was changed and has been restored"
    assert note in fmt["output"] and note not in fmt["running"]
    assert note in fmt["list"] and note in fmt["kill"]


def test_user_text_is_a_compact_fenced_block(tool: Tool) -> None:
    user = tool.ed.lua(
        """
        local t = require('run_bash.tool_format')
        local lines = {}
        for i = 1, 100 do lines[i] = 'line ' .. i end
        local out = table.concat(lines, '\\n') .. '\\n````\\n'
        local _, user = t.format({ action = 'run', result = { id = 'a', cmd = 'seq 100', status = 'exited',
          exit_code = 0, sandboxed = true, backend = 'sandlock', output = out, duration_s = 0.1 } })
        return user
        """
    )
    lines = user.split("\n")
    assert lines[0].startswith("**run_bash** `seq 100` [exit 0")
    assert lines[1] == "`````" and lines[-1] == "`````"  # longer than the ```` in the output
    assert "earlier line(s)" in lines[2]
    assert len(lines) < 50


# -- without CodeCompanion -------------------------------------------------------------------------------


def test_without_codecompanion_nothing_breaks(editor: Any) -> None:
    editor.lua("_G.__notes = {}; vim.notify = function(m) table.insert(_G.__notes, m) end")
    assert editor.lua("return pcall(require, 'codecompanion')") is False
    editor.lua(
        "require('codecompanion._extensions.run_bash').setup({ sandbox = { backend = 'none' } })"
    )
    notes = wait_for(lambda: editor.lua("return _G.__notes"))
    assert any("codecompanion.config could not be loaded" in n for n in notes), notes
    assert editor.nvim.funcs.exists(":RunBash") == 2
    r = editor.run_sync({"cmd": "echo fine", "unsandboxed_ok": True})
    assert r["output"] == "fine\n"
