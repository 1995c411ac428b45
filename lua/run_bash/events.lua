--- Events from the host: dispatch to the callers waiting on them, the sessions mirror they keep
--- for completion without RPC, and the `User` autocommands.
---
--- The host sends events through `nvim_exec_lua` (`require('run_bash')._on_event(name, payload)`).
--- The listeners are registered by `run_bash.sessions` and `run_bash.changes`; this module owns
--- them, and fails them all when the host exits.
local M = {}
local H = {}

local gate = require("run_bash.gate")
local host = require("run_bash.host")

-- Required on use: `run_bash.changes` requires this module (its requests are answered by `reply`
-- events).
local function changes()
  return require("run_bash.changes")
end

---@class run_bash.Listeners
---@field result table<string, fun(result: table)[]> by session id: called once with its result
---@field output table<string, fun(text: string)[]> by session id: its live output
---@field reply table<integer, fun(reply: table)> by token: the answer to a request (`reply` event)
---@field started table<string, fun(info: table)[]> by session id: when a held run starts

---@type run_bash.Listeners
M.listeners = { result = {}, output = {}, reply = {}, started = {} }
H.next_token = 0

--- Sessions the host reported, for completion without RPC: id -> info. The host keeps a bounded
--- history (`sessions.keep_finished`) and says which sessions it forgot (`forgotten`); so does this.
M.sessions = {}

--- A new token for a `reply` listener.
---@return integer
function M.new_token()
  H.next_token = H.next_token + 1
  return H.next_token
end

--- Events from the host (called through nvim_exec_lua). Dispatched on the next tick, in order:
--- an event can arrive while Lua waits for some request to the host, and a request sent from a
--- handler right then (an audit line, a user's callback) would be answered out of order, which
--- makes Neovim drop the channel.
---@param name string
---@param payload table
function M.on_event(name, payload)
  vim.schedule(function()
    H.dispatch(name, payload)
  end)
end

---@param name string
---@param payload table
function H.dispatch(name, payload)
  if name == "started" or name == "exited" then
    M.sessions[payload.id] = payload
    changes().note_changes(payload)
    if name == "started" then
      local cbs = M.listeners.started[payload.id]
      M.listeners.started[payload.id] = nil
      for _, cb in ipairs(cbs or {}) do
        pcall(cb, payload)
      end
    end
  elseif name == "approve" then
    gate.on_approve(payload)
  elseif name == "ready" then
    host.on_ready()
  elseif name == "result" then
    M.sessions[payload.id] = payload
    changes().note_changes(payload)
    local cbs = M.listeners.result[payload.id]
    M.listeners.result[payload.id] = nil
    for _, cb in ipairs(cbs or {}) do
      local ok, err = pcall(cb, payload)
      if not ok then
        host.notify("result handler failed: " .. tostring(err), vim.log.levels.ERROR)
      end
    end
    if payload.status == "rejected" or payload.status == "cancelled" then
      -- Never started: forgotten by the host too.
      M.sessions[payload.id] = nil
      M.listeners.output[payload.id] = nil
      M.listeners.started[payload.id] = nil
    end
  elseif name == "output" then
    for _, cb in pairs(M.listeners.output[payload.id] or {}) do
      pcall(cb, payload.data)
    end
  elseif name == "forgotten" then
    for _, id in ipairs(payload.ids or {}) do
      M.forget(id)
    end
  elseif name == "reply" then
    local cb = M.listeners.reply[payload.token]
    M.listeners.reply[payload.token] = nil
    if cb then
      pcall(cb, payload)
    end
  end
  if name == "exited" or name == "result" then
    H.fire(name == "result" and "RunBashResult" or "RunBashExited", payload)
  end
end

--- Drop a session the host no longer knows from the mirror and every listener of it.
---@param id string
function M.forget(id)
  M.sessions[id] = nil
  M.listeners.output[id] = nil
  M.listeners.started[id] = nil
  M.listeners.result[id] = nil
end

---@param pattern string
---@param data table
function H.fire(pattern, data)
  vim.api.nvim_exec_autocmds("User", { pattern = pattern, data = data, modeline = false })
end

--- The host exited with `err`: fail every waiting caller and forget held runs. Running sessions
--- died with it: they become "lost", and whoever follows them hears that they ended.
---@param err string
function M.host_exited(err)
  for id, cbs in pairs(M.listeners.result) do
    M.listeners.result[id] = nil
    for _, cb in ipairs(cbs) do
      pcall(cb, { error = err })
    end
  end
  for token, cb in pairs(M.listeners.reply) do
    M.listeners.reply[token] = nil
    pcall(cb, { error = err })
  end
  M.listeners.started = {}
  local lost = {}
  for id, info in pairs(M.sessions) do
    if info.status == "running" then
      info.status = "lost"
      table.insert(lost, info)
    elseif info.status == "awaiting_approval" then
      info = nil -- its approval, if still open, can no longer start anything
    end
    M.sessions[id] = info
  end
  -- Their processes died with the host: whoever follows them hears that they ended.
  for _, info in ipairs(lost) do
    vim.schedule(function()
      H.fire("RunBashExited", info)
    end)
  end
end

return M
