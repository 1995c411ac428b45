--- run_bash: public Lua API, Python host lifecycle, RPC helpers and event dispatch.
---
--- The host is a pynvim remote plugin started by this module on first use (never at startup):
--- `jobstart({python, boot.py}, { rpc = true })`. Everything about sandboxes, rules and sessions is
--- decided in Python; this module only moves plain data across.
local M = {}
local H = {}

local uv = vim.uv or vim.loop

H.root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
H.pending = nil ---@type run_bash.Options|nil options given to setup() not yet sent to the host
H.good = nil ---@type run_bash.Options|nil the last options the host accepted
H.good_chan = nil -- the host that accepted them
H.lua_rules = {} -- pause-list rules given as Lua functions (of the options in force)
H.facts = nil -- where commands run and the limits, from setup's reply
H.chan = nil
H.job = nil
H.stderr = {}
H.expected_exit = false
H.listeners = { result = {}, output = {}, reply = {}, started = {} }
H.next_token = 0
H.setup_done = false
H.ready = false -- the host answered (a ping or its `ready` event)
H.starting = false -- a caller waits for the host to answer its first ping

--- Sessions the host reported, for completion without RPC: id -> info. The host keeps a bounded
--- history (`sessions.keep_finished`) and says which sessions it forgot (`forgotten`); so does this.
M.sessions = {}

--- Runs whose change sets the store keeps, newest first, for completion without RPC (as far as
--- this Neovim has heard: its own runs and undos, and the store's list at host start).
M.change_runs = {}

---@param msg string
---@param level? integer
function H.notify(msg, level)
  vim.schedule(function()
    vim.notify("run_bash: " .. msg, level or vim.log.levels.INFO)
  end)
end
M.notify = H.notify

--- Path of the plugin's checkout.
---@return string
function M.root()
  return H.root
end

--- The Python interpreter the host runs with: `g:run_bash_python`, else the plugin's `.venv`,
--- else `python3`.
---@return string
function M.python()
  if type(vim.g.run_bash_python) == "string" and vim.g.run_bash_python ~= "" then
    return vim.g.run_bash_python
  end
  local venv = H.root .. "/.venv/bin/python"
  if uv.fs_stat(venv) then
    return venv
  end
  return "python3"
end

--- The host's log file.
---@return string
function M.log_path()
  return vim.fn.stdpath("log") .. "/run_bash.log"
end

---@class run_bash.Options
---@field data table the options as plain data (Lua-function pause rules replaced by a marker)
---@field lua_rules table<string, function> the Lua-function pause rules, by command name

--- Split the options into data for the host and the Lua-function pause rules, which stay in Lua
--- and are called on the commands the host matched to them (see `M.check`).
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
  if H.chan and H.ready then
    H.send_setup(H.chan)
  elseif not H.chan then
    H.start()
  end
end

--- Send the pending options (or, to a host that just started, the last good ones); report a
--- problem once. Returns the channel (a rejected config keeps the host usable) or nil and why.
---@param chan integer
---@return integer|nil chan, string|nil err
function H.send_setup(chan)
  local cand = H.pending or H.good
  H.pending = nil
  H.setup_done = true
  if not cand then
    return H.fetch_facts(chan)
  end
  local data, problems = H.resolve_rule_functions(vim.deepcopy(cand.data), chan)
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
      return H.send_setup(chan)
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

---@return string the last lines the host printed on stderr
function H.stderr_tail()
  local lines = {}
  for i = math.max(1, #H.stderr - 8), #H.stderr do
    if H.stderr[i] ~= "" then
      table.insert(lines, H.stderr[i])
    end
  end
  return table.concat(lines, "\n")
end

---@param python string
---@return string
function H.did_not_start(python)
  local reason = H.stderr_tail()
  return ("the Python host did not start (%s)%s. Run `make deps`; see :checkhealth run_bash"):format(
    python,
    reason ~= "" and (": " .. reason) or ""
  )
end

--- The host's job ended (or its channel closed: `code` nil): fail every waiting caller, forget
--- held runs, say so once.
---@param job integer
---@param code integer|nil
function H.on_exit(job, code)
  if job ~= H.job then
    return
  end
  local had_chan, was_ready = H.chan ~= nil, H.ready
  H.chan, H.job, H.setup_done, H.ready = nil, nil, false, false
  -- Every caller still waiting must hear about it: a chat never hangs on a dead host.
  local err = code and ("the Python host exited (code %d)"):format(code) or "the Python host exited"
  local tail = H.stderr_tail()
  if tail ~= "" then
    err = err .. ": " .. tail
  end
  for id, cbs in pairs(H.listeners.result) do
    H.listeners.result[id] = nil
    for _, cb in ipairs(cbs) do
      pcall(cb, { error = err })
    end
  end
  for token, cb in pairs(H.listeners.reply) do
    H.listeners.reply[token] = nil
    pcall(cb, { error = err })
  end
  H.listeners.started = {}
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
  if had_chan and not H.expected_exit and not H.starting then
    if was_ready then
      H.notify(
        err .. ". It restarts on the next command; see :checkhealth run_bash",
        vim.log.levels.ERROR
      )
    else
      H.notify(H.did_not_start(M.python()), vim.log.levels.ERROR)
    end
  end
end

--- Start the host process without waiting for it; it says `ready` when it is up.
---@return integer|nil chan, string|nil err
function H.start()
  local python = M.python()
  if vim.fn.executable(python) ~= 1 then
    local msg = ("Python not found: %s (run `make deps` in %s, or set g:run_bash_python)"):format(
      python,
      H.root
    )
    return nil, msg
  end
  H.stderr = {}
  H.expected_exit = false
  H.ready = false
  local boot = H.root .. "/rplugin/python3/run_bash_host/boot.py"
  local env = {
    RUN_BASH_LOG = M.log_path(),
    RUN_BASH_AUDIT = require("run_bash.audit_log").path(),
    RUN_BASH_UNDO = require("run_bash.undo").path(),
  }
  local ok, job = pcall(vim.fn.jobstart, { python, boot }, {
    rpc = true,
    env = env,
    on_stderr = function(_, data)
      for _, line in ipairs(data or {}) do
        table.insert(H.stderr, line)
      end
      while #H.stderr > 50 do
        table.remove(H.stderr, 1)
      end
    end,
    on_exit = function(j, code)
      H.on_exit(j, code)
    end,
  })
  if not ok or job <= 0 then
    return nil, ("could not start %s: %s"):format(python, tostring(job))
  end
  H.job, H.chan = job, job
  pcall(vim.rpcnotify, job, "run_bash.hello")
  return job
end

--- The host is up (`ready` event, or a ping answered): send the options, and learn which runs
--- can be undone (for completion).
function H.on_ready()
  if H.chan and not H.ready then
    H.ready = true
  end
  if H.chan and not H.setup_done then
    H.send_setup(H.chan)
  end
  local chan = H.chan
  if chan then
    -- After the start's own requests: reading the store's list costs the host a moment.
    vim.defer_fn(function()
      if H.chan == chan then
        M.undo_runs(function() end)
      end
    end, H.RUNS_AFTER_MS)
  end
end
H.RUNS_AFTER_MS = 1000

--- Start the host if needed and wait until it answers; returns the channel or nil and an error.
---@return integer|nil chan, string|nil err
function M.ensure_host()
  if not H.chan then
    local _, err = H.start()
    if err then
      return nil, err
    end
  end
  if not H.ready then
    local job = H.chan
    H.starting = true
    local pok, pong = pcall(vim.rpcrequest, job, "run_bash.ping")
    if not pok or pong ~= "pong" then
      -- Give the job a moment to exit so its stderr (the real reason) is available.
      vim.wait(1000, function()
        return H.job == nil
      end, 10)
      H.starting = false
      pcall(vim.fn.jobstop, job)
      H.chan, H.job = nil, nil
      return nil, H.did_not_start(M.python())
    end
    H.starting = false
    H.ready = true
  end
  if not H.setup_done then
    return H.send_setup(H.chan)
  end
  return H.chan
end

--- Call a host method. Returns the value, or nil and an error message (never raises).
---@param method string
---@return any value, string|nil err
function M.request(method, ...)
  local chan, err = M.ensure_host()
  if not chan then
    return nil, err
  end
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash." .. method, ...)
  if not ok and chan == H.chan and tostring(reply):find("Invalid channel", 1, true) then
    -- The host died and its keeper (the job) is still sweeping: the channel is gone before the
    -- job's exit is reported. Handle it as that exit, then ask a new host, once.
    H.on_exit(H.job, nil)
    chan, err = M.ensure_host()
    if not chan then
      return nil, err
    end
    ok, reply = pcall(vim.rpcrequest, chan, "run_bash." .. method, ...)
  end
  if not ok then
    return nil, tostring(reply)
  end
  if type(reply) ~= "table" then
    return reply
  end
  if reply.error then
    return nil, reply.error
  end
  return reply.ok
end

--- Events from the host (called through nvim_exec_lua). Dispatched on the next tick, in order:
--- an event can arrive while Lua waits for some request to the host, and a request sent from a
--- handler right then (an audit line, a user's callback) would be answered out of order, which
--- makes Neovim drop the channel.
---@param name string
---@param payload table
function M._on_event(name, payload)
  vim.schedule(function()
    H.dispatch(name, payload)
  end)
end

---@param name string
---@param payload table
function H.dispatch(name, payload)
  if name == "started" or name == "exited" then
    M.sessions[payload.id] = payload
    H.note_changes(payload)
    if name == "started" then
      local cbs = H.listeners.started[payload.id]
      H.listeners.started[payload.id] = nil
      for _, cb in ipairs(cbs or {}) do
        pcall(cb, payload)
      end
    end
  elseif name == "approve" then
    H.on_approve(payload)
  elseif name == "ready" then
    H.on_ready()
  elseif name == "result" then
    M.sessions[payload.id] = payload
    H.note_changes(payload)
    local cbs = H.listeners.result[payload.id]
    H.listeners.result[payload.id] = nil
    for _, cb in ipairs(cbs or {}) do
      local ok, err = pcall(cb, payload)
      if not ok then
        H.notify("result handler failed: " .. tostring(err), vim.log.levels.ERROR)
      end
    end
    if payload.status == "rejected" or payload.status == "cancelled" then
      -- Never started: forgotten by the host too.
      M.sessions[payload.id] = nil
      H.listeners.output[payload.id] = nil
      H.listeners.started[payload.id] = nil
    end
  elseif name == "output" then
    for _, cb in pairs(H.listeners.output[payload.id] or {}) do
      pcall(cb, payload.data)
    end
  elseif name == "forgotten" then
    for _, id in ipairs(payload.ids or {}) do
      H.forget(id)
    end
  elseif name == "reply" then
    local cb = H.listeners.reply[payload.token]
    H.listeners.reply[payload.token] = nil
    if cb then
      pcall(cb, payload)
    end
  end
  if name == "exited" or name == "result" then
    H.fire(name == "result" and "RunBashResult" or "RunBashExited", payload)
  end
end

--- Drop a session the host no longer knows from the mirror and every listener of it.
function H.forget(id)
  M.sessions[id] = nil
  H.listeners.output[id] = nil
  H.listeners.started[id] = nil
  H.listeners.result[id] = nil
end

---@param pattern string
---@param data table
function H.fire(pattern, data)
  vim.api.nvim_exec_autocmds("User", { pattern = pattern, data = data, modeline = false })
end

--- A run the host holds for the user's decision (`approve` event): the approval window asks and
--- the answer goes back to the waiting run with `rpcnotify`. Python has decided that it must ask.
---@param p { id: string, cwd: string, answer: table }
function H.on_approve(p)
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
  if H.chan then
    pcall(vim.rpcnotify, H.chan, "run_bash.decide", id, decision, reason or vim.NIL)
  end
end

--- Call the user's Lua-function pause rules on exactly the `(rule name, argv)` pairs Python
--- matched; a rule that raises counts as "pause".
---@param calls [string, string[]][]
---@return { pause?: boolean, error?: string }[]
function H.eval_lua_rules(calls)
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

--- The host's gate answer for `cmd`: `{ needs_approval, reason, rule, decision_id, backend,
--- sandboxed, … }`, with the user's Lua-function rules evaluated.
---@param cmd string
---@param opts? { skip_sandbox?: boolean, ask?: boolean, cwd?: string, source?: "user"|"agent" }
---@return table|nil answer, string|nil err
function M.check(cmd, opts)
  opts = vim.tbl_extend("force", { cwd = vim.fn.getcwd() }, opts or {})
  local answer, err = M.request("check", cmd, opts)
  if not answer or not answer.lua_pending then
    return answer, err
  end
  local again = vim.tbl_extend("force", opts, {
    decision_id = answer.decision_id,
    lua_results = H.eval_lua_rules(answer.lua_calls),
  })
  return M.request("check", cmd, again)
end

--- Run `cb(info)` when a session starts (after its approval, for a held run).
---@param id string
---@param cb fun(info: table)
function M.on_started(id, cb)
  H.listeners.started[id] = H.listeners.started[id] or {}
  table.insert(H.listeners.started[id], cb)
end

--- Start a command. `on_result(result)` is called exactly once (result.error on failure).
--- Without `approved`, the host holds a command that needs the user's approval and the approval
--- window asks first (`ask` always asks); `approved = true` says the caller already asked.
---@param spec table { cmd, cwd?, timeout?, bg_after?, skip_sandbox?, approved?, ask?, live?, decision_id? }
---@param on_result? fun(result: table)
---@param on_output? fun(text: string)
---@return table|nil info, string|nil err
function M.run(spec, on_result, on_output)
  local chan, herr = M.ensure_host() -- the options, and with them the Lua rules, are in force
  if not chan then
    return nil, herr
  end
  if type(spec) == "table" and spec.decision_id == nil and next(H.lua_rules) ~= nil then
    -- The user's Lua rules judge the command first: the run starts on that answer.
    local answer, cerr = M.check(spec.cmd, {
      skip_sandbox = spec.skip_sandbox,
      cwd = spec.cwd,
      source = spec.source,
    })
    if not answer then
      return nil, cerr
    end
    spec = vim.tbl_extend("force", spec, { decision_id = answer.decision_id })
  end
  local info, err = M.request("run", spec)
  if not info then
    return nil, err
  end
  -- A very fast command's result may already be here: never overwrite it with the start info.
  M.sessions[info.id] = M.sessions[info.id] or info
  if on_output then
    H.listeners.output[info.id] = H.listeners.output[info.id] or {}
    table.insert(H.listeners.output[info.id], on_output)
  end
  if on_result then
    -- The result may already have been reported (a very fast command): ask for it.
    local done = M.sessions[info.id] and M.sessions[info.id].output ~= nil
    if done then
      on_result(M.sessions[info.id])
    else
      H.listeners.result[info.id] = H.listeners.result[info.id] or {}
      table.insert(H.listeners.result[info.id], on_result)
    end
  end
  return info
end

--- Follow a session's live output. Returns what it printed so far.
---@param id string
---@param on_output fun(text: string)
---@return table|nil info, string|nil err
function M.watch(id, on_output)
  local info, err = M.request("watch", id)
  if not info then
    return nil, err
  end
  H.listeners.output[id] = H.listeners.output[id] or {}
  table.insert(H.listeners.output[id], on_output)
  return info
end

--- Keep session `id` in the host's history while `buf` exists (its output is open there).
function M.pin_while(id, buf)
  local reason = "buffer " .. buf
  if not M.request("pin", id, reason) then
    return
  end
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    desc = "run_bash: let the host forget the session this buffer showed",
    callback = function()
      if H.chan then
        pcall(vim.rpcnotify, H.chan, "run_bash.unpin", id, reason)
      end
    end,
  })
end

--- Stop following: remove `on_output` (as given to `watch`), or every follower of `id` when nil.
---@param id string
---@param on_output? fun(text: string)
function M.unwatch(id, on_output)
  local list = H.listeners.output[id]
  if not list or on_output == nil then
    H.listeners.output[id] = nil
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
  H.listeners.result[id] = H.listeners.result[id] or {}
  table.insert(H.listeners.result[id], cb)
end

--- Kill a session (or every running one when `id` is nil); `cb(reply)` gets { result } or { error }.
---@param id string|nil
---@param cb? fun(reply: { result?: table, error?: string })
---@return table|nil info, string|nil err
function M.kill(id, cb)
  H.next_token = H.next_token + 1
  local token = H.next_token
  if cb then
    H.listeners.reply[token] = cb
  end
  local info, err
  if id == nil then
    info, err = M.request("kill_all", token)
  else
    info, err = M.request("kill", id, token)
  end
  if not info then
    H.listeners.reply[token] = nil
    return nil, err
  end
  return info
end

--- Remember a run whose change set is kept (its result says what it changed).
---@param run table a run result, session info, or an undo's outcome
function H.note_changes(run)
  local ch = run.changes
  local kept = type(ch) == "table" and type(ch.summary) == "string" and ch.summary ~= ""
  if type(run.undo_of) == "string" and type(run.run) == "string" then
    kept, run = run.recorded ~= "no change", { id = run.run }
  end
  if kept and not vim.tbl_contains(M.change_runs, run.id) then
    table.insert(M.change_runs, 1, run.id)
  end
end

--- Call a host method that answers with a `reply` event: its work may read the project's files,
--- so it runs on the host's worker threads and the host never waits for it. With `cb`, returns
--- true at once and calls `cb(result, err)` later (from the main loop). Without, waits for the
--- answer (|vim.wait()|, events keep being processed; not allowed in fast callbacks) and
--- returns it.
---@param method string
---@param args table the arguments before the token (`n` = their count; nil is sent as nil)
---@param cb? fun(result: any, err: string|nil)
---@return any result, string|nil err
function H.deferred(method, args, cb)
  H.next_token = H.next_token + 1
  local token = H.next_token
  local done, res, err = false, nil, nil
  H.listeners.reply[token] = function(reply)
    done, res, err = true, reply.result, reply.error
    if cb then
      cb(res, err)
    end
  end
  local call = {}
  for i = 1, args.n or #args do
    call[i] = args[i] == nil and vim.NIL or args[i]
  end
  table.insert(call, token)
  local ok, rerr = M.request(method, (table.unpack or unpack)(call))
  if not ok then
    H.listeners.reply[token] = nil
    if cb then
      cb(nil, rerr)
      return nil, rerr
    end
    return nil, rerr
  end
  if cb then
    return true
  end
  vim.wait(H.WAIT_MS, function()
    return done
  end, 5)
  if not done then
    H.listeners.reply[token] = nil
    return nil, ("no answer from the host within %d s"):format(H.WAIT_MS / 1000)
  end
  return res, err
end
H.WAIT_MS = 120000

--- Arguments for the change-set methods: the run id and options with the current directory
--- (whose project's latest run with changes is meant when `id` is nil).
---@param id string|nil
---@param opts any
function H.change_args(id, opts)
  if opts == nil then
    opts = {}
  end
  if type(opts) == "table" then
    opts = vim.tbl_extend("keep", opts, { cwd = vim.fn.getcwd() })
  end
  return { id, opts, n = 2 }
end

--- What run `id` changed: a list of `{path, kind, detail?, skipped?}` (`kind` "added",
--- "modified" or "deleted"; directories end with "/"; `skipped` says why the change cannot be
--- taken back). `id` nil: the latest run with changes in the current directory's project (else
--- anywhere). With `cb`, answers `cb(list, err)` later; without, waits for the host.
---@param id string|nil
---@param cb? fun(list: table[]|nil, err: string|nil)
---@return table[]|nil list, string|nil err
function M.changes(id, cb)
  local function pick(r, e)
    return r and r.changes, e
  end
  if cb then
    return H.deferred("changes", H.change_args(id), function(r, e)
      cb(pick(r, e))
    end)
  end
  return pick(H.deferred("changes", H.change_args(id)))
end

--- Run `id`'s whole change set: `{run, project, label, undo_of, summary, changes}`.
---@param id string|nil
---@param cb? fun(set: table|nil, err: string|nil)
---@return table|nil set, string|nil err
function M.change_set(id, cb)
  return H.deferred("changes", H.change_args(id), cb)
end

--- Run `id`'s change set as a unified diff: `{run, text}`.
---@param id string|nil
---@param cb? fun(diff: table|nil, err: string|nil)
---@return table|nil diff, string|nil err
function M.diff(id, cb)
  return H.deferred("diff", H.change_args(id), cb)
end

--- What undoing run `id` would do now: `{run, project, label, restore, remove, conflicts,
--- not_recovered}` (`conflicts` and `not_recovered` as `{path, why}`).
---@param id string|nil
---@param opts? { force?: boolean }
---@param cb? fun(plan: table|nil, err: string|nil)
---@return table|nil plan, string|nil err
function M.undo_plan(id, opts, cb)
  return H.deferred("plan", H.change_args(id, opts), cb)
end

--- Undo run `id`: put back what it changed, path by path (`force`: also paths that changed again
--- since, the conflicts). Returns `{restored, removed, conflicts, not_recovered, errors, run,
--- undo_of, recorded}`: `run` is the undo's own id (an undo can be undone). With `cb`, answers
--- later; without, waits for the host.
---@param id string|nil
---@param opts? { force?: boolean }
---@param cb? fun(done: table|nil, err: string|nil)
---@return table|nil done, string|nil err
function M.undo(id, opts, cb)
  local function seen(r, e)
    if r then
      H.note_changes(r)
    end
    return r, e
  end
  if cb then
    return H.deferred("undo", H.change_args(id, opts), function(r, e)
      cb(seen(r, e))
    end)
  end
  return seen(H.deferred("undo", H.change_args(id, opts)))
end

--- Every kept change set, newest first: `{run, project, ended, counts, undo_of, label}`.
---@param cb? fun(list: table[]|nil, err: string|nil)
---@return table[]|nil list, string|nil err
function M.undo_runs(cb)
  local function seen(list, e)
    if type(list) == "table" then
      M.change_runs = vim.tbl_map(function(r)
        return r.run
      end, list)
    end
    return list, e
  end
  if cb then
    return H.deferred("undo_runs", { n = 0 }, function(l, e)
      cb(seen(l, e))
    end)
  end
  return seen(H.deferred("undo_runs", { n = 0 }))
end

--- The undo store: `{path, bytes, runs, projects, enabled}`.
---@param cb? fun(usage: table|nil, err: string|nil)
---@return table|nil usage, string|nil err
function M.undo_usage(cb)
  return H.deferred("undo_usage", { n = 0 }, cb)
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
  H.next_token = H.next_token + 1
  local token = H.next_token
  H.listeners.reply[token] = cb
  local info, err = M.request("wait", id, opts or vim.empty_dict(), token)
  if not info then
    H.listeners.reply[token] = nil
    return nil, err
  end
  return info
end

--- Every session of this Neovim (and the completion mirror updated).
---@return table[]|nil list, string|nil err
function M.sessions_list()
  local list, err = M.request("sessions")
  if list then
    local listed = {}
    for _, info in ipairs(list) do
      listed[info.id] = true
      M.sessions[info.id] = info
    end
    for id in pairs(M.sessions) do
      if not listed[id] then
        H.forget(id)
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
  return M.request("output", id, opts or vim.empty_dict())
end

--- What the tool's schema says: where commands run and the limits (`backend`, `sandboxed`,
--- `unavailable`, `default_timeout`, `max_timeout`, `max_bg_after`), from setup's reply. Starts
--- the host if needed.
---@return table|nil facts, string|nil err
function M.facts()
  local chan, err = M.ensure_host()
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

--- Whether the host is running (without starting it).
---@return boolean
function M.is_running()
  return H.chan ~= nil
end

--- Stop the host (kills every session first).
function M.stop()
  if not H.chan then
    return
  end
  H.expected_exit = true
  pcall(vim.rpcrequest, H.chan, "run_bash.shutdown")
  pcall(vim.fn.jobstop, H.job)
end

--- For tests and health: the job id of the host, or nil.
---@return integer|nil
function M._job()
  return H.job
end

return M
