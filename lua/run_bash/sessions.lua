--- Sessions: start a command, follow its output, wait on it, kill it, list them.
---
--- The host owns the sessions; this module asks it and registers the callers waiting on a
--- session's events (`run_bash.events` owns those listeners and the sessions mirror).
local M = {}

local events = require("run_bash.events")
local gate = require("run_bash.gate")
local host = require("run_bash.host")
local options = require("run_bash.options")

--- Run `cb(info)` when a session starts (after its approval, for a held run).
---@param id string
---@param cb fun(info: table)
function M.on_started(id, cb)
  events.listeners.started[id] = events.listeners.started[id] or {}
  table.insert(events.listeners.started[id], cb)
end

--- Start a command. `on_result(result)` is called exactly once (result.error on failure).
--- Without `approved`, the host holds a command that needs the user's approval and the approval
--- window asks first (`ask` always asks); `approved = true` says the caller already asked.
---@param spec table { cmd, cwd?, timeout?, bg_after?, skip_sandbox?, approved?, ask?, live?, decision_id? }
---@param on_result? fun(result: table)
---@param on_output? fun(text: string)
---@return table|nil info, string|nil err
function M.run(spec, on_result, on_output)
  local chan, herr = host.ensure_host() -- the options, and with them the Lua rules, are in force
  if not chan then
    return nil, herr
  end
  if type(spec) == "table" and spec.decision_id == nil and options.has_lua_rules() then
    -- The user's Lua rules judge the command first: the run starts on that answer.
    local answer, cerr = gate.check(spec.cmd, {
      skip_sandbox = spec.skip_sandbox,
      cwd = spec.cwd,
      source = spec.source,
    })
    if not answer then
      return nil, cerr
    end
    spec = vim.tbl_extend("force", spec, { decision_id = answer.decision_id })
  end
  local info, err = host.request("run", spec)
  if not info then
    return nil, err
  end
  -- A very fast command's result may already be here: never overwrite it with the start info.
  events.sessions[info.id] = events.sessions[info.id] or info
  if on_output then
    events.listeners.output[info.id] = events.listeners.output[info.id] or {}
    table.insert(events.listeners.output[info.id], on_output)
  end
  if on_result then
    -- The result may already have been reported (a very fast command): ask for it.
    local done = events.sessions[info.id] and events.sessions[info.id].output ~= nil
    if done then
      on_result(events.sessions[info.id])
    else
      events.listeners.result[info.id] = events.listeners.result[info.id] or {}
      table.insert(events.listeners.result[info.id], on_result)
    end
  end
  return info
end

--- Follow a session's live output. Returns what it printed so far.
---@param id string
---@param on_output fun(text: string)
---@return table|nil info, string|nil err
function M.watch(id, on_output)
  local info, err = host.request("watch", id)
  if not info then
    return nil, err
  end
  events.listeners.output[id] = events.listeners.output[id] or {}
  table.insert(events.listeners.output[id], on_output)
  return info
end

--- Keep session `id` in the host's history while `buf` exists (its output is open there).
function M.pin_while(id, buf)
  local reason = "buffer " .. buf
  if not host.request("pin", id, reason) then
    return
  end
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    desc = "run_bash: let the host forget the session this buffer showed",
    callback = function()
      if host.chan() then
        pcall(vim.rpcnotify, host.chan(), "run_bash.unpin", id, reason)
      end
    end,
  })
end

--- Stop following: remove `on_output` (as given to `watch`), or every follower of `id` when nil.
---@param id string
---@param on_output? fun(text: string)
function M.unwatch(id, on_output)
  local list = events.listeners.output[id]
  if not list or on_output == nil then
    events.listeners.output[id] = nil
    return
  end
  for i = #list, 1, -1 do
    if list[i] == on_output then
      table.remove(list, i)
    end
  end
end

--- Wait for a session's result without polling (cb gets the result table).
---@param id string
---@param cb fun(result: table)
function M.on_result(id, cb)
  events.listeners.result[id] = events.listeners.result[id] or {}
  table.insert(events.listeners.result[id], cb)
end

--- Kill a session (or every running one when `id` is nil); `cb(reply)` gets { result } or { error }.
---@param id string|nil
---@param cb? fun(reply: { result?: table, error?: string })
---@return table|nil info, string|nil err
function M.kill(id, cb)
  local token = events.new_token()
  if cb then
    events.listeners.reply[token] = cb
  end
  local info, err
  if id == nil then
    info, err = host.request("kill_all", token)
  else
    info, err = host.request("kill", id, token)
  end
  if not info then
    events.listeners.reply[token] = nil
    return nil, err
  end
  return info
end

--- Wait on a session: for a line of output new since the last read to match `wait_for`, or (without
--- it) for the session to end, at most `timeout` seconds (1-60, default 30). `cb(reply)` gets
--- `{ result }` (`outcome`: "matched", "exited", "ended", "timeout" or "slow", with the new output)
--- or `{ error }`. Bad arguments and an unknown id are an error at once.
---@param id string
---@param opts? { wait_for?: string, timeout?: number }
---@param cb fun(reply: { result?: table, error?: string })
---@return table|nil info, string|nil err
function M.wait(id, opts, cb)
  local token = events.new_token()
  events.listeners.reply[token] = cb
  local info, err = host.request("wait", id, opts or vim.empty_dict(), token)
  if not info then
    events.listeners.reply[token] = nil
    return nil, err
  end
  return info
end

--- Every session of this Neovim (and the completion mirror updated).
---@return table[]|nil list, string|nil err
function M.sessions_list()
  local list, err = host.request("sessions")
  if list then
    local listed = {}
    for _, info in ipairs(list) do
      listed[info.id] = true
      events.sessions[info.id] = info
    end
    for id in pairs(events.sessions) do
      if not listed[id] then
        events.forget(id)
      end
    end
  end
  return list, err
end

--- New output of a session since the last read, or its last `tail` lines.
---@param id string
---@param opts? { tail?: integer }
---@return table|nil page, string|nil err
function M.output(id, opts)
  return host.request("output", id, opts or vim.empty_dict())
end

return M
