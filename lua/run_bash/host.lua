--- The Python host's lifecycle: start, ready, exit, restart, and the RPC request helper.
---
--- The host is a Python process on a msgpack-RPC job channel, started by `setup()` (in the
--- background: nothing waits for it) or on first use, never at startup:
--- `jobstart({python, boot.py}, { rpc = true })`. This module owns the process and its channel;
--- the options it is sent live in `run_bash.options`, the callers waiting on its events in
--- `run_bash.events` (told here when the host exits).
---
--- Two ways to wait for it: `ensure_host()` blocks until it answers (for the synchronous API:
--- `request`, `check`, CodeCompanion's approval); `when_ready(fn)` never blocks: `fn` runs after
--- the host's `ready` event (a run asked for while the host starts is queued, not failed).
--- Once Neovim is exiting no host starts: `stop()` (VimLeavePre) already stopped the host, and
--- Neovim signals its jobs once and then waits for every one to exit while callbacks (a job's
--- on_exit, the deferred list of undoable runs) still run: a host started from one of them is
--- never signalled and its channel never closed, so `:qa!` would wait for it for ever.
local M = {}
local H = {}

local uv = vim.uv or vim.loop

H.root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
H.chan = nil
H.job = nil
H.stderr = {}
H.expected_exit = false
H.ready = false -- the host answered (a ping or its `ready` event)
H.starting = false -- a caller waits for the host to answer its first ping
H.waiting = {} ---@type fun(chan: integer|nil, err: string|nil)[] callers of `when_ready`
H.start_timer = nil -- stops a host that does not say `ready` in time
-- How long a starting host may take to say `ready` before the callers waiting for it fail.
H.START_TIMEOUT_MS = 30000

---@param msg string
---@param level? integer
function M.notify(msg, level)
  vim.schedule(function()
    vim.notify("run_bash: " .. msg, level or vim.log.levels.INFO)
  end)
end

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

--- The host's channel, or nil when it is not running (without starting it).
---@return integer|nil
function M.chan()
  return H.chan
end

--- Whether the host answered (a ping or its `ready` event).
---@return boolean
function M.is_ready()
  return H.ready
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
  H.chan, H.job, H.ready = nil, nil, false
  require("run_bash.options").host_exited()
  local err = code and ("the Python host exited (code %d)"):format(code) or "the Python host exited"
  local tail = H.stderr_tail()
  if tail ~= "" then
    err = err .. ": " .. tail
  end
  local why = err
  if not was_ready then
    why = H.timed_out and H.timed_out_msg() or H.did_not_start(M.python())
  end
  -- Every caller still waiting must hear about it: a chat never hangs on a dead host.
  require("run_bash.events").host_exited(err)
  H.flush(nil, why)
  if had_chan and not H.expected_exit and not H.starting then
    if was_ready then
      M.notify(
        err .. ". It restarts on the next command; see :checkhealth run_bash",
        vim.log.levels.ERROR
      )
    else
      M.notify(why, vim.log.levels.ERROR)
    end
  end
end

--- Whether Neovim is exiting (`v:exiting` is set before VimLeavePre).
---@return boolean
function H.exiting()
  return vim.v.exiting ~= vim.NIL
end

---@return string
function H.timed_out_msg()
  return ("the Python host did not answer within %g s (%s). See :checkhealth run_bash"):format(
    H.START_TIMEOUT_MS / 1000,
    M.python()
  )
end

--- Start the host process without waiting for it; it says `ready` when it is up. Refused while
--- Neovim exits.
---@return integer|nil chan, string|nil err
function M.start()
  if H.exiting() then
    return nil, "Neovim is exiting: the run_bash host is not started again"
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
  H.ready = false
  local boot = H.root .. "/rplugin/python3/run_bash_host/boot.py"
  local env = {
    RUN_BASH_LOG = M.log_path(),
    RUN_BASH_AUDIT = require("run_bash.audit_log").path(),
    RUN_BASH_UNDO = require("run_bash.undo").path(),
    RUN_BASH_BACKEND = require("run_bash.options").named_backend(),
    -- bubblewrap's probe answer, kept for the next host while nothing it depends on changes.
    RUN_BASH_PROBE_FILE = vim.fn.stdpath("state") .. "/run_bash/bwrap-probe.json",
    -- The policy each directory's first run got: the next host's first sandbox starts from it.
    RUN_BASH_SPARE_FILE = vim.fn.stdpath("state") .. "/run_bash/first-policies.json",
    RUN_BASH_STARTED_NS = tostring(vim.uv.hrtime()), -- start-up's marks count from here
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
  H.timed_out = false
  -- The options go with it (when they are plain data): the host applies them while it starts.
  pcall(vim.rpcnotify, job, "run_bash.hello", require("run_bash.options").early() or vim.NIL)
  H.start_timer = vim.defer_fn(function()
    if H.job == job and not H.ready then
      H.timed_out = true
      pcall(vim.fn.jobstop, job) -- its exit fails the callers waiting for it
    end
  end, H.START_TIMEOUT_MS)
  return job
end

--- The host answered: stop the start timer.
function H.answered()
  H.ready = true
  if H.start_timer then
    pcall(function()
      H.start_timer:stop()
      H.start_timer:close()
    end)
    H.start_timer = nil
  end
end

--- Call the callers waiting for the host, in the order they asked: `fn(chan)`, or `fn(nil, err)`
--- when it could not start.
---@param chan integer|nil
---@param err? string
function H.flush(chan, err)
  while #H.waiting > 0 do
    local fn = table.remove(H.waiting, 1)
    local ok, cerr = pcall(fn, chan, err)
    if not ok then
      M.notify("internal error: " .. tostring(cerr), vim.log.levels.ERROR)
    end
  end
end

--- Whether the host is up and has its options: a request now is answered without starting
--- anything.
---@return boolean
function M.is_up()
  return H.chan ~= nil and H.ready and require("run_bash.options").setup_done()
end

--- Call `fn(chan)` once the host is up and has its options, or `fn(nil, err)` when it cannot
--- start. Never waits: when the host is not up, it is started in the background (if it is not
--- starting already) and `fn` runs after its `ready` event; callers run in the order they asked.
---@param fn fun(chan: integer|nil, err: string|nil)
function M.when_ready(fn)
  if #H.waiting == 0 and M.is_up() then
    fn(H.chan)
    return
  end
  table.insert(H.waiting, fn)
  if not H.chan then
    local _, err = M.start()
    if err then
      H.flush(nil, err)
    end
  elseif H.ready then
    -- Up, but its options were not sent yet (a new host a synchronous call woke).
    vim.schedule(M.on_ready)
  end
end

--- The host is up (`ready` event, or a ping answered): send the options, and learn which runs
--- can be undone (for completion).
function M.on_ready()
  if H.chan and not H.ready then
    H.answered()
  end
  local options = require("run_bash.options")
  if H.chan and not options.setup_done() then
    options.send_setup(H.chan)
  end
  if H.chan and H.ready then
    H.flush(H.chan)
  end
  local chan = H.chan
  if chan then
    -- After the start's own requests: reading the store's list costs the host a moment.
    vim.defer_fn(function()
      if H.chan == chan then
        require("run_bash.changes").undo_runs(function() end)
      end
    end, H.RUNS_AFTER_MS)
  end
end
H.RUNS_AFTER_MS = 1000

--- Start the host if needed and wait until it answers; returns the channel or nil and an error.
---@return integer|nil chan, string|nil err
function M.ensure_host()
  if not H.chan then
    local _, err = M.start()
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
    H.answered()
  end
  local options = require("run_bash.options")
  if not options.setup_done() then
    local chan, serr = options.send_setup(H.chan)
    if chan then
      H.flush(chan) -- runs queued while the host started asked before this caller
    end
    return chan, serr
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
  if H.ready then
    -- (A host still starting has no sessions: its keeper cleans up after it.)
    pcall(vim.rpcrequest, H.chan, "run_bash.shutdown")
  end
  pcall(vim.fn.jobstop, H.job)
end

--- For tests and health: the job id of the host, or nil.
---@return integer|nil
function M.job()
  return H.job
end

M._H = H

return M
