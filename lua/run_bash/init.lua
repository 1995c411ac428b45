--- run_bash: public Lua API, Python host lifecycle, RPC helpers and event dispatch.
---
--- The host is a pynvim remote plugin started by this module on first use (never at startup):
--- `jobstart({python, boot.py}, { rpc = true })`. Everything about sandboxes, rules and sessions is
--- decided in Python; this module only moves plain data across.
local M = {}
local H = {}

local uv = vim.uv or vim.loop

H.root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
H.opts = {} -- the user's options, with Lua functions already resolved to data
H.lua_rules = {} -- pause-list rules given as Lua functions: name -> function(args)
H.chan = nil
H.job = nil
H.stderr = {}
H.expected_exit = false
H.listeners = { result = {}, output = {}, reply = {}, started = {} }
H.next_token = 0
H.setup_done = false

--- Sessions the host reported, for completion without RPC: id -> info. The host keeps a bounded
--- history (`sessions.keep_finished`) and says which sessions it forgot (`forgotten`); so does this.
M.sessions = {}

---@param msg string
---@param level? integer
function H.notify(msg, level)
  vim.schedule(function()
    vim.notify("run_bash: " .. msg, level or vim.log.levels.INFO)
  end)
end
M.notify = H.notify

--- Path of the plugin's checkout.
function M.root()
  return H.root
end

--- The Python interpreter the host runs with: `g:run_bash_python`, else the plugin's `.venv`,
--- else `python3`.
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

function M.log_path()
  return vim.fn.stdpath("log") .. "/run_bash.log"
end

--- Replace Lua functions in the options by data. Pause-list functions stay in Lua and are
--- evaluated on the commands Python parsed (see `M.check`); path-rule functions are applied to
--- the defaults Python reports when the host starts.
---@param opts table
function H.prepare_opts(opts)
  opts = vim.deepcopy(opts or {})
  H.lua_rules = {}
  if type(opts.pauselist) == "table" then
    for name, rule in pairs(opts.pauselist) do
      if type(rule) == "function" then
        H.lua_rules[name] = rule
        opts.pauselist[name] = "<lua-function>"
      end
    end
  end
  return opts
end

--- Apply `function(defaults)` path rules using the defaults the host computes.
function H.resolve_rule_functions(opts, chan)
  local rules = vim.tbl_get(opts, "sandbox", "rules")
  if type(rules) ~= "table" then
    return opts
  end
  local has_fn = false
  for _, v in pairs(rules) do
    has_fn = has_fn or type(v) == "function"
  end
  if not has_fn then
    return opts
  end
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash.rule_defaults")
  local defaults = ok and type(reply) == "table" and type(reply.ok) == "table" and reply.ok
  for key, v in pairs(rules) do
    if type(v) == "function" and not defaults then
      -- Never hand a rule function an empty list: its result would replace every default.
      H.notify(
        ("`sandbox.rules.%s`: the defaults are unavailable (%s); using them unchanged"):format(
          key,
          tostring(ok and reply and reply.error or reply)
        ),
        vim.log.levels.WARN
      )
      rules[key] = nil
    elseif type(v) == "function" then
      local fok, res = pcall(v, vim.deepcopy(defaults[key] or {}))
      if not fok or type(res) ~= "table" then
        H.notify(
          ("`sandbox.rules.%s` function failed: %s; using the defaults"):format(key, tostring(res)),
          vim.log.levels.WARN
        )
        res = nil
      end
      rules[key] = res
    end
  end
  return opts
end

--- Set the options. Cheap: the host starts on first use.
---@param opts? table
function M.setup(opts)
  vim.validate("opts", opts, "table", true)
  H.opts = H.prepare_opts(opts or {})
  H.setup_done = false
  if H.chan then
    H.send_setup(H.chan)
  end
end

function H.send_setup(chan)
  local opts = H.resolve_rule_functions(vim.deepcopy(H.opts), chan)
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash.setup", opts)
  if not ok then
    return nil, tostring(reply)
  end
  H.setup_done = true
  if reply.error then
    -- The host keeps its previous configuration: report the problem once, do not fail every call.
    vim.schedule(function()
      vim.notify_once("run_bash: " .. reply.error, vim.log.levels.ERROR)
    end)
    return chan
  end
  H.backend = reply.ok
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

function H.stderr_tail()
  local lines = {}
  for i = math.max(1, #H.stderr - 8), #H.stderr do
    if H.stderr[i] ~= "" then
      table.insert(lines, H.stderr[i])
    end
  end
  return table.concat(lines, "\n")
end

function H.on_exit(job, code)
  if job ~= H.job then
    return
  end
  local had_chan = H.chan ~= nil
  H.chan, H.job, H.setup_done = nil, nil, false
  -- Every caller still waiting must hear about it: a chat never hangs on a dead host.
  local err = ("the Python host exited (code %d)"):format(code)
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
  for id, info in pairs(M.sessions) do
    if info.status == "running" then
      info.status = "lost"
    elseif info.status == "awaiting_approval" then
      info = nil -- its approval, if still open, can no longer start anything
    end
    M.sessions[id] = info
  end
  if had_chan and not H.expected_exit then
    H.notify(
      err .. ". It restarts on the next command; see :checkhealth run_bash",
      vim.log.levels.ERROR
    )
  end
end

--- Start the host if needed; returns the channel or nil and an error message.
function M.ensure_host()
  if H.chan then
    if H.setup_done then
      return H.chan
    end
    return H.send_setup(H.chan)
  end
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
  local boot = H.root .. "/rplugin/python3/run_bash_host/boot.py"
  local env = { RUN_BASH_LOG = M.log_path(), RUN_BASH_AUDIT = require("run_bash.audit_log").path() }
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
  local pok, pong = pcall(vim.rpcrequest, job, "run_bash.ping")
  if not pok or pong ~= "pong" then
    -- Give the job a moment to exit so its stderr (the real reason) is available.
    vim.wait(1000, function()
      return H.job == nil
    end, 10)
    local reason = H.stderr_tail()
    pcall(vim.fn.jobstop, job)
    H.chan, H.job = nil, nil
    return nil,
      ("the Python host did not start (%s)%s. Run `make deps`; see :checkhealth run_bash"):format(
        python,
        reason ~= "" and (": " .. reason) or ""
      )
  end
  return H.send_setup(job)
end

--- Call a host method. Returns the value, or nil and an error message (never raises).
---@param method string
function M.request(method, ...)
  local chan, err = M.ensure_host()
  if not chan then
    return nil, err
  end
  local ok, reply = pcall(vim.rpcrequest, chan, "run_bash." .. method, ...)
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
function M._on_event(name, payload)
  vim.schedule(function()
    H.dispatch(name, payload)
  end)
end

function H.dispatch(name, payload)
  if name == "started" or name == "exited" then
    M.sessions[payload.id] = payload
    if name == "started" then
      local cbs = H.listeners.started[payload.id]
      H.listeners.started[payload.id] = nil
      for _, cb in ipairs(cbs or {}) do
        pcall(cb, payload)
      end
    end
  elseif name == "approve" then
    H.on_approve(payload)
  elseif name == "result" then
    M.sessions[payload.id] = payload
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
    vim.api.nvim_exec_autocmds("User", {
      pattern = name == "result" and "RunBashResult" or "RunBashExited",
      data = payload,
      modeline = false,
    })
  end
end

--- Drop a session the host no longer knows from the mirror and every listener of it.
function H.forget(id)
  M.sessions[id] = nil
  H.listeners.output[id] = nil
  H.listeners.started[id] = nil
  H.listeners.result[id] = nil
end

--- A run the host holds for the user's decision (`run` without `approved`): Lua-function rules
--- are evaluated here; when nothing pauses and it runs sandboxed it starts, else the approval
--- window asks. The answer goes back to the waiting run with `rpcnotify`.
function H.on_approve(p)
  local verdict = H.apply_lua_rules(p.verdict or {})
  verdict.session_id = p.id -- the audit's decision line names the run it decided
  local function decide(decision, reason)
    if H.chan then
      pcall(vim.rpcnotify, H.chan, "run_bash.decide", p.id, decision, reason or "")
    end
  end
  if not p.ask and not verdict.pause and verdict.sandboxed then
    require("run_bash.audit_log").decision(p.cmd, verdict, "auto")
    return decide("auto")
  end
  require("run_bash.approval").request({ cmd = p.cmd, verdict = verdict, cwd = p.cwd }, decide)
end

--- Evaluate the pause-list verdict for `cmd`, including Lua-function rules.
---@param cmd string
---@param opts? { skip_sandbox?: boolean }
---@return table|nil verdict, string|nil err
function M.check(cmd, opts)
  local verdict, err = M.request("check", cmd, opts or vim.empty_dict())
  if not verdict then
    return nil, err
  end
  return H.apply_lua_rules(verdict)
end

--- Apply the Lua-function pause-list rules to a verdict from the host (which names the rules
--- whose commands appeared); returns the verdict, paused when a rule says so or fails.
function H.apply_lua_rules(verdict)
  if not verdict.pause then
    -- Python names the Lua rules whose command (or command family, e.g. `mkfs` for `mkfs.ext4`)
    -- appeared; the rule gets the arguments of each matching command.
    local wanted = {}
    for _, name in ipairs(verdict.lua_rules or {}) do
      wanted[name] = H.lua_rules[name]
    end
    for _, argv in ipairs(verdict.commands or {}) do
      local base = argv[1] and vim.fs.basename(argv[1]) or ""
      local name, rule = base, wanted[base] or H.lua_rules[base]
      if not rule then
        for family, fn in pairs(wanted) do
          if vim.startswith(base, family) then
            name, rule = family, fn
            break
          end
        end
      end
      if rule then
        local args = vim.list_slice(argv, 2)
        local ok, res = pcall(rule, args)
        if not ok or res then
          verdict.pause = true
          verdict.rule = name
          verdict.command = table.concat(argv, " ")
          verdict.reason = ok and ("`%s` matches your pause-list rule for %s"):format(
            verdict.command,
            name
          ) or ("your pause-list rule for %s failed (%s): pausing to be safe"):format(
            name,
            tostring(res)
          )
          break
        end
      end
    end
  end
  return verdict
end

--- Run `cb(info)` when a session starts (after its approval, for a held run).
function M.on_started(id, cb)
  H.listeners.started[id] = H.listeners.started[id] or {}
  table.insert(H.listeners.started[id], cb)
end

--- Start a command. `on_result(result)` is called exactly once (result.error on failure).
--- Without `approved`, the host holds a command that needs the user's approval and the approval
--- window asks first (`ask` always asks); `approved = true` says the caller already asked.
---@param spec table { cmd, cwd?, timeout?, bg_after?, skip_sandbox?, approved?, ask?, live? }
---@param on_result? fun(result: table)
---@param on_output? fun(text: string)
---@return table|nil info, string|nil err
function M.run(spec, on_result, on_output)
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
function M.on_result(id, cb)
  H.listeners.result[id] = H.listeners.result[id] or {}
  table.insert(H.listeners.result[id], cb)
end

--- Kill a session (or every running one when `id` is nil); `cb(reply)` gets { result } or { error }.
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

function M.output(id, opts)
  return M.request("output", id, opts or vim.empty_dict())
end

--- Whether the host is running (without starting it).
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
function M._job()
  return H.job
end

return M
