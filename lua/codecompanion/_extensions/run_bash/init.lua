--- CodeCompanion extension entry for run_bash.
---
--- require("codecompanion").setup({ extensions = { run_bash = { opts = { ... } } } })
---
--- CodeCompanion calls `setup(opts)` after its own config is set up. We pass the options to
--- `require("run_bash").setup` unchanged (the original plugin's legacy shapes are migrated by the
--- host, which reports a one-time notice) and register the `run_bash` tool into the live
--- `interactions.chat.tools` table. Use it with `@{run_bash}` or `default_tools`.
local M = {}

local function notify(msg, level)
  vim.schedule(function()
    vim.notify("run_bash: " .. msg, level or vim.log.levels.ERROR)
  end)
end

--- The live tools table of CodeCompanion's config (or nil and why).
local function tools_config()
  local ok, config = pcall(require, "codecompanion.config")
  if not ok or type(config) ~= "table" then
    return nil, "codecompanion.config could not be loaded"
  end
  local tools = vim.tbl_get(config, "interactions", "chat", "tools")
    or vim.tbl_get(config, "strategies", "chat", "tools")
  if type(tools) ~= "table" then
    return nil, "CodeCompanion has no `interactions.chat.tools` table (unsupported version?)"
  end
  return tools
end

---@param opts? table the `extensions.run_bash.opts` table
function M.setup(opts)
  if opts ~= nil and type(opts) ~= "table" then
    notify("`extensions.run_bash.opts` should be a table, not " .. type(opts))
    opts = nil
  end
  local ok, err = pcall(require("run_bash").setup, opts or {})
  if not ok then
    notify("setup failed: " .. tostring(err))
  end
  local tools, why = tools_config()
  if not tools then
    notify(why)
    return
  end
  tools.run_bash = require("run_bash.tool").config_entry()
end

--- Reachable as `require("codecompanion").extensions.run_bash`.
M.exports = {
  --- The pause-list verdict for a command: { pause, reason, rule, sandboxed, backend, ... }.
  check = function(cmd, opts)
    return require("run_bash").check(cmd, opts)
  end,
  --- Every session of this Neovim.
  sessions = function()
    return require("run_bash").sessions_list()
  end,
  --- Kill one session (or all when `id` is nil).
  kill = function(id, cb)
    return require("run_bash").kill(id, cb)
  end,
  --- New output of a session since the last read ({ tail = N } for the last N lines).
  output = function(id, opts)
    return require("run_bash").output(id, opts)
  end,
}

return M
