--- The CodeCompanion tool `run_bash`: the glue between CodeCompanion's approval flow and the host's
--- gate.
---
--- The host decides everything: it checks the agent's arguments (`tool_args`), answers whether a
--- command needs the user (`check`, the gate's answer with its `decision_id`), starts the run on that
--- answer and writes every audit line. This module passes the answer to CodeCompanion (the approval
--- block) and the user's answer back (`run` with `approved`, or `decide` for a reject or cancel).
--- Text is built by `run_bash.tool_format`, the schema by `run_bash.tool_schema`.
---
--- CodeCompanion deep-copies the tool table for every call, so nothing long-lived lives here:
--- sessions belong to the host. The per-call state is `tool._run_bash` (`run_bash.ToolState`).
local M = {}
local H = {}

local format = require("run_bash.tool_format")
local schema = require("run_bash.tool_schema")

local fmt = string.format

---@class run_bash.ToolState
---@field args? table the arguments as the host checked them
---@field args_error? string why they are wrong
---@field answer? table the gate's answer (from `require_approval_before`)
---@field check_error? string why the gate could not answer
---@field asked? boolean CodeCompanion asked the user
---@field always? boolean the user chose "Always accept"
---@field session_id? string the run that started

local function rb()
  return require("run_bash")
end

local function notices()
  return require("run_bash.notices")
end

--- Per-call state kept on the (deep-copied) tool table.
---@param tool table
---@return run_bash.ToolState
function H.state(tool)
  tool._run_bash = tool._run_bash or {}
  return tool._run_bash
end

--- The agent's arguments as the host checks them (once per call): the table, or nil and the
--- message for the agent.
---@param tool table
---@return table|nil args, string|nil err
function H.args(tool)
  local st = H.state(tool)
  if st.args == nil and st.args_error == nil then
    local raw = tool.args
    if raw == nil or raw == vim.NIL then
      raw = vim.empty_dict()
    end
    st.args, st.args_error = rb().request("tool_args", raw)
  end
  return st.args, st.args_error
end

--- The gate's answer for the command in `a`.
---@param a table checked arguments (action "run")
---@return table|nil answer, string|nil err
function H.check(a)
  return rb().check(a.cmd, { skip_sandbox = a.skip_sandbox, source = "agent" })
end

--- `require_approval_before(tool, tools)`: the gate's `needs_approval` for a run; kill, output and
--- list never ask; bad arguments do not ask either (`cmds[1]` reports them and runs nothing).
---@param tool table
---@return boolean
function M.needs_approval(tool, _tools)
  local st = H.state(tool)
  local a = H.args(tool)
  if not a or a.action ~= "run" then
    return false
  end
  local answer, err = H.check(a)
  if not answer then
    st.check_error = err
    return false
  end
  st.answer = answer
  st.asked = answer.needs_approval == true
  return st.asked
end

--- The key CodeCompanion stores "Always accept" under: the command, marked when it runs unsandboxed,
--- so accepting `cmd` in the sandbox never accepts it without.
---@param tool table
---@return string
function M.cmd_string(tool)
  local st = H.state(tool)
  local a = H.args(tool)
  if not a then
    return "run_bash (invalid arguments)"
  end
  if a.action ~= "run" then
    return fmt("%s %s", a.action, a.session_id or "")
  end
  if st.asked then
    -- Called again after the prompt only by "Always accept".
    st.always = true
  end
  local sandboxed
  if st.answer then
    sandboxed = st.answer.sandboxed == true
  else
    sandboxed = not a.skip_sandbox and tool._sandboxed == true
  end
  return sandboxed and a.cmd or ("[no sandbox] " .. a.cmd)
end

--- Whether CodeCompanion skipped the gate because the user chose "Always accept" for this key in
--- this chat (its approvals cache, `codecompanion.interactions.chat.tools.approvals`, the module
--- CodeCompanion's own documentation uses).
---@return boolean
function H.cached_approval(tools, tool)
  local ok, approvals = pcall(require, "codecompanion.interactions.chat.tools.approvals")
  if not ok or type(approvals) ~= "table" or not tools or not tools.bufnr then
    return false
  end
  local aok, yes = pcall(approvals.is_approved, approvals, tools.bufnr, {
    cmd = M.cmd_string(tool),
    tool_name = tool.name or "run_bash",
  })
  return aok and yes == true
end

--- The `run` spec for `a`, on the gate's answer and what the user said.
---@return table|nil spec, string|nil err
function H.spec(tools, tool, a)
  local st = H.state(tool)
  if st.check_error then
    return nil, "could not check the command: " .. tostring(st.check_error)
  end
  local spec = {
    cmd = a.cmd,
    cwd = vim.fn.getcwd(),
    timeout = a.timeout,
    bg_after = a.bg_after,
    skip_sandbox = a.skip_sandbox,
    wait_for = a.wait_for,
    source = "agent",
  }
  local answer = st.answer
  if answer then
    spec.decision_id = answer.decision_id
    if st.asked then
      spec.approved = true
      spec.answer = st.always and "always" or "accept"
      spec.unsandboxed_ok = answer.sandboxed ~= true
    end
    return spec
  end
  -- The gate did not run: CodeCompanion found a cached approval, or nothing asked at all.
  local err
  answer, err = H.check(a)
  if not answer then
    return nil, "could not check the command: " .. tostring(err)
  end
  st.answer = answer
  spec.decision_id = answer.decision_id
  if not answer.needs_approval then
    return spec
  end
  if H.cached_approval(tools, tool) then
    spec.approved = true
    spec.answer = "always_cached"
    spec.unsandboxed_ok = answer.sandboxed ~= true
    return spec
  end
  return nil, "this command needs the user's approval, which was not given; nothing ran"
end

--- `cmds[1]`: returns nil and calls `opts.output_cb` exactly once, from the main loop.
---@param tools table CodeCompanion's tools object (`tools.tool` is this call's tool)
---@param _args table the raw arguments (the host checks `tool.args`)
---@param opts { output_cb?: fun(msg: table), register_job?: fun(job: table) }
function M.execute(tools, _args, opts)
  opts = opts or {}
  local tool = (type(tools) == "table" and type(tools.tool) == "table") and tools.tool or {}
  if tool.args == nil then
    tool.args = _args
  end
  local sent = false
  local function finish(status, data)
    if sent then
      return
    end
    sent = true
    vim.schedule(function()
      if opts.output_cb then
        opts.output_cb({ status = status, data = data })
      end
    end)
  end

  local a, err = H.args(tool)
  if not a then
    finish("error", { error = err })
    return nil
  end

  if a.action == "list" then
    local list, lerr = rb().sessions_list()
    if not list then
      finish("error", { action = "list", error = lerr })
    else
      for _, s in ipairs(list) do
        notices().told(s)
      end
      finish("success", { action = "list", sessions = list })
    end
    return nil
  end

  if a.action == "output" then
    local o, oerr = rb().output(a.session_id, a.tail and { tail = a.tail } or nil)
    if not o then
      finish("error", { action = "output", error = oerr })
    else
      notices().told(o)
      finish("success", { action = "output", info = o, tail = a.tail })
    end
    return nil
  end

  if a.action == "wait" then
    local wopts = { wait_for = a.wait_for, timeout = a.timeout }
    local info, werr = rb().wait(a.session_id, wopts, function(reply)
      if reply.error then
        finish("error", { action = "wait", error = reply.error })
      else
        notices().told(reply.result or {})
        finish("success", { action = "wait", result = reply.result or {} })
      end
    end)
    if not info then
      finish("error", { action = "wait", error = werr })
    end
    return nil
  end

  if a.action == "kill" then
    notices().ending(a.session_id) -- the kill's own result tells the agent
    local info, kerr = rb().kill(a.session_id, function(reply)
      if reply.error then
        finish("error", { action = "kill", error = reply.error })
      else
        finish("success", { action = "kill", result = reply.result or {} })
      end
    end)
    if not info then
      finish("error", { action = "kill", error = kerr })
    end
    return nil
  end

  local spec, serr = H.spec(tools, tool, a)
  if not spec then
    finish("error", { action = "run", error = serr })
    return nil
  end
  local st = H.state(tool)
  local info, rerr = rb().run(spec, function(result)
    if result.error then
      finish("error", { action = "run", error = result.error })
    else
      if result.status == "running" then
        -- It went on in the background: the chat that started it hears when it ends.
        notices().track(result, type(tools) == "table" and tools.chat or nil)
      end
      finish(format.run_status(result), { action = "run", result = result })
    end
  end)
  if not info then
    finish("error", { action = "run", error = rerr })
    return nil
  end
  st.session_id = info.id
  if type(opts.register_job) == "function" then
    -- Stopping the chat stops the whole run (every process in its sandbox).
    opts.register_job({
      id = info.id,
      kill = function()
        rb().kill(info.id)
      end,
    })
  end
  return nil
end

--- The last element of CodeCompanion's output list (`stderr` spans the whole round).
function H.last(list)
  if type(list) == "table" and not getmetatable(list) and #list > 0 then
    return list[#list]
  end
  return list
end

--- Output handlers (self = the prepared tool, with self.args).
M.output = {
  cmd_string = function(self, _meta)
    return M.cmd_string(self)
  end,

  prompt = function(self, _meta)
    local a, err = H.args(self)
    if not a or a.action ~= "run" then
      return fmt("Run the run_bash tool (%s)?", err or a.action)
    end
    return format.prompt_text(a, H.state(self).answer)
  end,

  success = function(self, stdout, meta)
    local for_llm, for_user = format.format(H.last(stdout), self.args)
    meta.tools.chat:add_tool_output(self, for_llm, for_user)
  end,

  -- CodeCompanion's stderr list spans the whole round: this call's error is the last element.
  error = function(self, stderr, meta)
    local for_llm, for_user = format.format(H.last(stderr), self.args)
    meta.tools.chat:add_tool_output(self, for_llm, for_user)
  end,

  rejected = function(self, meta)
    local reason = meta and meta.opts and meta.opts.reason
    if reason == nil or reason == vim.NIL or vim.trim(tostring(reason)) == "" then
      reason = nil
    end
    local st = H.state(self)
    if st.answer then
      rb().decide(st.answer.decision_id, "reject", reason)
    end
    local a = H.args(self)
    meta.tools.chat:add_tool_output(
      self,
      "User rejected: " .. (reason or "no reason given"),
      fmt(
        "**run_bash** rejected `%s`%s",
        format._H.short_cmd(a and a.cmd or ""),
        reason and (": " .. reason) or ""
      )
    )
  end,

  cancelled = function(self, meta)
    local st = H.state(self)
    if st.answer and not st.session_id then
      rb().decide(st.answer.decision_id, "cancel")
    end
    local a = H.args(self)
    meta.tools.chat:add_tool_output(
      self,
      "The user cancelled the execution of the run_bash tool"
        .. (st.session_id and fmt(" (session %s was stopped)", st.session_id) or ""),
      fmt("**run_bash** cancelled `%s`", format._H.short_cmd(a and a.cmd or ""))
    )
  end,
}

--- The tool table (a fresh one for every call; the schema comes from setup's reply).
---@return table
function M.create()
  local facts, err = rb().facts()
  return {
    name = "run_bash",
    schema = schema.schema(facts, err),
    cmds = { M.execute },
    output = M.output,
    _sandboxed = facts and facts.sandboxed == true or false,
  }
end

--- The entry for `config.interactions.chat.tools.run_bash`.
---@return table
function M.config_entry()
  return {
    callback = function()
      return M.create()
    end,
    description = "Run a Bash command, sandboxed (pause list for risky commands; background sessions)",
    opts = {
      require_cmd_approval = true,
      allowed_in_yolo_mode = false,
      require_approval_before = function(tool, tools)
        return M.needs_approval(tool, tools)
      end,
    },
  }
end

M._H = H

return M
