--- Sessions: start a command, follow its output, wait on it, kill it, list them.
---
--- The host owns the sessions; this module asks it and registers the callers waiting on a
--- session's events (`run_bash.events` owns those listeners and the sessions mirror).
local M = {}
local H = {}

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

--- Runs asked for while the host starts, by the id they were given: sent once it is up.
---@type table<string, { spec: table, on_result?: fun(result: table), on_output?: fun(text: string) }>
H.queued = {}

--- A new id for a queued run: 6 characters of a-z and 0-9 (the host accepts any such id that
--- no session, held run or undo of it uses, and refuses a taken one).
---@return string
function H.new_id()
  local chars = "abcdefghijkmnpqrstuvwxyz23456789" -- 32 of them: one per 5 bits
  while true do
    local bytes = assert((vim.uv or vim.loop).random(6))
    local id = {}
    for i = 1, 6 do
      local k = bytes:byte(i) % #chars + 1
      id[i] = chars:sub(k, k)
    end
    local sid = table.concat(id)
    if not H.queued[sid] and not events.sessions[sid] then
      return sid
    end
  end
end

--- The end of a queued run that never reached the host (cancelled, or the host did not start):
--- its `on_result`, once.
---@param id string
---@param result table
function H.end_queued(id, result)
  local q = H.queued[id]
  H.queued[id] = nil
  events.listeners.started[id] = nil
  if q and q.on_result then
    local ok, err = pcall(q.on_result, result)
    if not ok then
      host.notify("result handler failed: " .. tostring(err), vim.log.levels.ERROR)
    end
  end
end

--- Queue `spec` until the host is up (it starts in the background): returns at once with the
--- run's id and status "queued"; the run is sent as soon as the host says `ready`.
---@return table|nil info, string|nil err
function H.queue(spec, on_result, on_output)
  if not host.chan() then
    local _, err = host.start()
    if err then
      return nil, err
    end
  end
  local id = H.new_id()
  -- Where the user was when they asked, not where Neovim is when the host is up.
  spec = vim.tbl_extend("force", spec, { id = id, cwd = spec.cwd or vim.fn.getcwd() })
  H.queued[id] = { spec = spec, on_result = on_result, on_output = on_output }
  host.when_ready(function(chan, err)
    local q = H.queued[id]
    if not q then
      return -- killed while it waited
    end
    if not chan then
      return H.end_queued(id, { id = id, cmd = spec.cmd, status = "failed", error = err })
    end
    H.queued[id] = nil
    local info, rerr = H.start(q.spec, q.on_result, q.on_output)
    if not info then
      H.queued[id] = q
      H.end_queued(id, { id = id, cmd = spec.cmd, status = "failed", error = rerr })
    end
  end)
  return { id = id, cmd = spec.cmd, cwd = spec.cwd, status = "queued" }
end

--- Start a command. `on_result(result)` is called exactly once (result.error on failure).
--- Without `approved`, the host holds a command that needs the user's approval and the approval
--- window asks first (`ask` always asks); `approved = true` says the caller already asked.
--- While the host starts, the run is queued (status "queued", never blocking the editor) and
--- sent when it is up; `on_started` and `kill` work on its id meanwhile.
---@param spec table { cmd, cwd?, timeout?, bg_after?, skip_sandbox?, approved?, ask?, live?, decision_id? }
---@param on_result? fun(result: table)
---@param on_output? fun(text: string)
---@return table|nil info, string|nil err
function M.run(spec, on_result, on_output)
  if type(spec) == "table" and spec.id == nil and not host.is_up() then
    return H.queue(spec, on_result, on_output)
  end
  return H.start(spec, on_result, on_output)
end

--- Send a run to the host (waiting for it if it is starting: see `M.run`).
---@return table|nil info, string|nil err
function H.start(spec, on_result, on_output)
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
  local cancelled = {}
  for qid in pairs(H.queued) do
    if id == nil or id == qid then
      table.insert(cancelled, qid)
    end
  end
  for _, qid in ipairs(cancelled) do
    local result = {
      id = qid,
      cmd = H.queued[qid].spec.cmd,
      status = "cancelled",
      error = "the run was cancelled before the host started; nothing ran",
    }
    H.end_queued(qid, result)
    if cb and id ~= nil then
      pcall(cb, { result = result })
    end
  end
  if id ~= nil and #cancelled > 0 then
    return { id = id, status = "cancelled" }
  end
  if id == nil and not (host.chan() and host.is_ready()) then
    if cb then
      pcall(cb, { result = { count = #cancelled } })
    end
    return { count = #cancelled } -- a host that is not up has no sessions yet
  end
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
