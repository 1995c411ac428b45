--- run_bash: the public Lua API.
---
--- The host is a pynvim remote plugin started on first use (never at startup). Everything about
--- sandboxes, rules and sessions is decided in Python; the Lua side only moves plain data across.
--- This table is the API; the work is done by:
---   `run_bash.host`      the host's lifecycle (start, exit, restart) and `request`
---   `run_bash.options`   the options sent to the host and the facts it answers with
---   `run_bash.events`    the host's events, the callers waiting on them, the mirrors they keep
---   `run_bash.gate`      the gate's answer for a command; held runs and the user's decision
---   `run_bash.sessions`  start, follow, wait on and kill sessions
local M = {}
local H = {}

local events = require("run_bash.events")
local gate = require("run_bash.gate")
local host = require("run_bash.host")
local options = require("run_bash.options")
local sessions = require("run_bash.sessions")

--- Sessions the host reported (id -> info), for completion without RPC (see `run_bash.events`).
M.sessions = events.sessions

--- Runs whose change sets the store keeps, newest first, for completion without RPC (see
--- `run_bash.events`).
M.change_runs = events.change_runs

M.notify = host.notify
M.root = host.root
M.python = host.python
M.log_path = host.log_path
M.setup = options.setup
M.ensure_host = host.ensure_host
M.request = host.request
M._on_event = events.on_event
M.decide = gate.decide
M.check = gate.check
M.on_started = sessions.on_started
M.run = sessions.run
M.watch = sessions.watch
M.pin_while = sessions.pin_while
M.unwatch = sessions.unwatch
M.on_result = sessions.on_result
M.kill = sessions.kill
M.wait = sessions.wait
M.sessions_list = sessions.sessions_list
M.output = sessions.output

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
  local token = events.new_token()
  local done, res, err = false, nil, nil
  events.listeners.reply[token] = function(reply)
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
    events.listeners.reply[token] = nil
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
    events.listeners.reply[token] = nil
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
      events.note_changes(r)
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
      -- In place: `events.change_runs` is the one list (`M.change_runs` is the same table).
      local runs = events.change_runs
      for i = #runs, 1, -1 do
        runs[i] = nil
      end
      for i, r in ipairs(list) do
        runs[i] = r.run
      end
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

M.facts = options.facts
M.facts_cached = options.facts_cached
M.is_running = host.is_running
M.stop = host.stop
M._job = host.job

return M
