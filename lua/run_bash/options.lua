--- The options: sent to the host (which checks them), kept when it accepts them, and sent again
--- to a host that restarts; the facts its reply carries (where commands run, the limits).
---
--- Options cross RPC as plain data. Pause-list rules given as Lua functions stay here and are
--- called on exactly the commands the host matched to them (`M.eval_lua_rules`); path rules given
--- as `function(defaults)` are resolved here, against the host's defaults, before sending.
local M = {}
local H = {}

local host = require("run_bash.host")

H.pending = nil ---@type run_bash.Options|nil options given to setup() not yet sent to the host
H.good = nil ---@type run_bash.Options|nil the last options the host accepted
H.good_chan = nil -- the host that accepted them
H.lua_rules = {} -- pause-list rules given as Lua functions (of the options in force)
H.facts = nil -- where commands run and the limits, from setup's reply
H.setup_done = false

---@class run_bash.Options
---@field data table the options as plain data (Lua-function pause rules replaced by a marker)
---@field lua_rules table<string, function> the Lua-function pause rules, by command name

--- Split the options into data for the host and the Lua-function pause rules, which stay in Lua
--- and are called on the commands the host matched to them (see `run_bash.gate`'s `check`).
---@param opts table
---@return run_bash.Options
function H.prepare_opts(opts)
  local data = vim.deepcopy(opts or {})
  local rules = {}
  if type(data.pauselist) == "table" then
    for name, rule in pairs(data.pauselist) do
      if type(rule) == "function" then
        rules[name] = rule
        data.pauselist[name] = "<lua-function>"
      end
    end
  end
  return { data = data, lua_rules = rules }
end

--- Apply `function(defaults)` path rules to the defaults the host computes. A function that fails
--- or returns something other than a list is a problem in the options, named by its key.
---@param data table
---@param chan integer
---@return table data, string[] problems
function H.resolve_rule_functions(data, chan)
  local problems = {}
  local rules = vim.tbl_get(data, "sandbox", "rules")
  if type(rules) ~= "table" then
    return data, problems
  end
  local has_fn = false
  for _, v in pairs(rules) do
    has_fn = has_fn or type(v) == "function"
  end
  if not has_fn then
    return data, problems
  end
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash.rule_defaults")
  local defaults = ok and type(reply) == "table" and type(reply.ok) == "table" and reply.ok
  for key, v in pairs(rules) do
    if type(v) == "function" then
      local fok, res
      if defaults then
        fok, res = pcall(v, vim.deepcopy(defaults[key] or {}))
      else
        fok, res = false, "the defaults are unavailable: " .. tostring(ok and reply.error or reply)
      end
      if not fok then
        table.insert(
          problems,
          ("`sandbox.rules.%s`: the function failed: %s"):format(key, tostring(res))
        )
      elseif type(res) ~= "table" then
        table.insert(
          problems,
          ("`sandbox.rules.%s`: the function should return a list, not %s"):format(key, type(res))
        )
      end
      rules[key] = fok and res or nil
    end
  end
  return data, problems
end

--- Set the options. The host checks them at once: when it is not running yet it starts in the
--- background (nothing waits for it) and reports a problem as soon as it is up. A problem is one
--- error naming every bad key; the previous options stay in force.
---@param opts? table
function M.setup(opts)
  vim.validate("opts", opts, "table", true)
  H.pending = H.prepare_opts(opts or {})
  H.setup_done = false
  if host.chan() and host.is_ready() then
    M.send_setup(host.chan())
  elseif not host.chan() then
    host.start()
  end
end

--- Whether the running host has been sent the options (it is sent them before its first request).
---@return boolean
function M.setup_done()
  return H.setup_done
end

--- The backend the options name (`sandbox.backend`; `false` is "none"), or nil: only a hint for
--- the host's start-up (it skips the sandbox launcher and the backend check before `ready` when it
--- is "none"). The host's own reading of the options decides everything else.
---@return string|nil
function M.named_backend()
  local cand = H.pending or H.good
  local backend = cand and vim.tbl_get(cand.data or {}, "sandbox", "backend")
  if backend == false then
    return "none"
  end
  return type(backend) == "string" and backend or nil
end

--- Where `v` holds something that is not plain data (what a message to the host can carry: a
--- function, say): its option path and its Lua type; nil when it is all plain data.
---@param v any
---@param path? string
---@return string|nil path, string|nil kind
function H.not_plain(v, path)
  if type(v) == "table" then
    for k, x in pairs(v) do
      local here = path and (path .. "." .. tostring(k)) or tostring(k)
      local where, kind = H.not_plain(k, here)
      if not where then
        where, kind = H.not_plain(x, here)
      end
      if where then
        return where, kind
      end
    end
    return nil
  end
  if v == vim.NIL or type(v) == "string" or type(v) == "number" or type(v) == "boolean" then
    return nil
  end
  return path or "", type(v)
end

--- The options to send with the host's `hello`, so that it applies them while it starts (its
--- `setup` request then finds them in force): the defaults when `setup()` was never called (the
--- host then knows CodeCompanion's files and prepares the first command's sandbox too), nil when
--- they are not plain data: path rules given as functions (resolved against the host's defaults
--- once it answers), or a function where none belongs (`setup`'s own request reports that; a
--- `hello` that cannot be sent would leave the host never ready).
---@return table|nil
function M.early()
  local cand = H.pending or H.good
  local opts = cand and cand.data or vim.empty_dict()
  if H.not_plain(opts) then
    return nil
  end
  local cc = require("run_bash.agent_files").collect() or vim.NIL
  return { opts = opts, codecompanion = cc }
end

--- The host exited: the next one is sent the options again.
function M.host_exited()
  H.setup_done = false
end

--- Send the pending options (or, to a host that just started, the last good ones); report a
--- problem once. Returns the channel (a rejected config keeps the host usable) or nil and why.
---@param chan integer
---@return integer|nil chan, string|nil err
function M.send_setup(chan)
  local cand = H.pending or H.good
  H.pending = nil
  H.setup_done = true
  if not cand then
    return H.fetch_facts(chan)
  end
  local data, problems = H.resolve_rule_functions(vim.deepcopy(cand.data), chan)
  local where, kind = H.not_plain(data)
  if where and #problems == 0 then
    -- Refused here: a request cannot carry it (the host would never hear of these options).
    table.insert(problems, ("`%s`: a %s is not an option value"):format(where, kind))
  end
  local reply
  if #problems > 0 then
    reply = { error = "invalid config: " .. table.concat(problems, "; ") }
  else
    -- What CodeCompanion reads from a project by itself (rules files): checked after every run.
    local cc_files = require("run_bash.agent_files").collect() or vim.NIL
    local ok, r = pcall(vim.rpcrequest, chan, "run_bash.setup", data, cc_files)
    if not ok then
      H.setup_done = false
      return nil, tostring(r)
    end
    reply = r
  end
  if reply.error then
    vim.schedule(function()
      vim.notify_once("run_bash: " .. reply.error, vim.log.levels.ERROR)
    end)
    if H.good and cand ~= H.good and H.good_chan ~= chan then
      -- A host that just started has the defaults: the last good options go back in force.
      return M.send_setup(chan)
    end
    local got, err = H.fetch_facts(chan)
    if H.facts then
      H.facts.config_error = reply.error
    end
    return got, err
  end
  H.good, H.good_chan = cand, chan
  H.lua_rules = cand.lua_rules
  H.facts = reply.ok
  if type(reply.ok.backend_error) == "string" then
    -- A backend named explicitly that does not work here: commands fail until it is fixed.
    local msg = "run_bash: " .. reply.ok.backend_error
    vim.schedule(function()
      vim.notify_once(msg, vim.log.levels.ERROR)
    end)
  end
  for _, notice in ipairs(reply.ok.notices or {}) do
    vim.schedule(function()
      vim.notify_once("run_bash: " .. notice, vim.log.levels.WARN)
    end)
  end
  return chan
end

--- Ask the host where commands run (when no setup reply says it).
---@param chan integer
---@return integer|nil chan, string|nil err
function H.fetch_facts(chan)
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash.facts")
  if not ok then
    return nil, tostring(reply)
  end
  H.facts = type(reply) == "table" and reply.ok or nil
  return chan
end

--- What the tool's schema says: where commands run and the limits (`backend`, `sandboxed`,
--- `unavailable`, `default_timeout`, `max_timeout`, `max_bg_after`), from setup's reply. Starts
--- the host if needed.
---@return table|nil facts, string|nil err
function M.facts()
  local chan, err = host.ensure_host()
  if not chan then
    return nil, err
  end
  return H.facts
end

--- The last `facts()` the host gave, without starting it (nil before the first answer).
---@return table|nil
function M.facts_cached()
  return H.facts
end

--- Whether the options in force have Lua-function pause rules.
---@return boolean
function M.has_lua_rules()
  return next(H.lua_rules) ~= nil
end

--- Call the user's Lua-function pause rules on exactly the `(rule name, argv)` pairs Python
--- matched; a rule that raises counts as "pause".
---@param calls [string, string[]][]
---@return { pause?: boolean, error?: string }[]
function M.eval_lua_rules(calls)
  local results = {}
  for i, call in ipairs(calls or {}) do
    local name, argv = call[1], call[2]
    local rule = H.lua_rules[name]
    if type(rule) ~= "function" then
      results[i] = { error = "the rule is not a Lua function any more (setup changed)" }
    else
      local ok, res = pcall(rule, vim.list_slice(argv, 2))
      if ok then
        results[i] = { pause = res ~= nil and res ~= false }
      else
        results[i] = { error = tostring(res) }
      end
    end
  end
  return results
end

return M
