--- The approval gate, seen from Lua: the host's answer for a command (with the user's Lua-function
--- pause rules evaluated), runs the host holds for the user's decision, and that decision sent back.
---
--- Python decides whether a command must ask (`gate.py`); the approval window
--- (`run_bash.approval`) only shows and asks.
local M = {}

local host = require("run_bash.host")
local options = require("run_bash.options")

--- A run the host holds for the user's decision (`approve` event): the approval window asks and
--- the answer goes back to the waiting run with `rpcnotify`. Python has decided that it must ask.
---@param p { id: string, cwd: string, answer: table }
function M.on_approve(p)
  local answer = p.answer or {}
  require("run_bash.approval").request(
    { cmd = answer.cmd, answer = answer, cwd = p.cwd },
    function(decision, reason)
      M.decide(p.id, decision, reason)
    end
  )
end

--- Tell the host the user's answer about a held run or a checked command (`decision_id`):
--- "accept", "always", "reject" or "cancel".
---@param id string
---@param decision "accept"|"always"|"reject"|"cancel"
---@param reason? string
function M.decide(id, decision, reason)
  if host.chan() then
    pcall(vim.rpcnotify, host.chan(), "run_bash.decide", id, decision, reason or vim.NIL)
  end
end

--- The host's gate answer for `cmd`: `{ needs_approval, reason, rule, decision_id, backend,
--- sandboxed, … }`, with the user's Lua-function rules evaluated.
---@param cmd string
---@param opts? { skip_sandbox?: boolean, ask?: boolean, cwd?: string, source?: "user"|"agent" }
---@return table|nil answer, string|nil err
function M.check(cmd, opts)
  if opts == nil or type(opts) == "table" then
    opts = vim.tbl_extend("force", { cwd = vim.fn.getcwd() }, opts or {})
  end -- anything else goes to the host as it is, which names what is wrong with it
  local answer, err = host.request("check", cmd, opts)
  if not answer or not answer.lua_pending then
    return answer, err
  end
  local again = vim.tbl_extend("force", opts, {
    decision_id = answer.decision_id,
    lua_results = options.eval_lua_rules(answer.lua_calls),
  })
  return host.request("check", cmd, again)
end

return M
