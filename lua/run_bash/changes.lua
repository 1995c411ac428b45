--- Change sets: what a run changed in its project, as a list or a unified diff, and undoing it.
---
--- The host keeps the change sets (the undo store) and reads the project's files on its worker
--- threads: every request here is answered by a `reply` event (`H.deferred`), so the host never
--- waits. This module keeps the list of runs with kept change sets, for completion.
local M = {}
local H = {}

local events = require("run_bash.events")
local host = require("run_bash.host")

--- Runs whose change sets the store keeps, newest first, for completion without RPC (as far as
--- this Neovim has heard: its own runs and undos, and the store's list at host start). Updated in
--- place: `require("run_bash").change_runs` is this table.
M.change_runs = {}

--- Remember a run whose change set is kept (its result says what it changed).
---@param run table a run result, session info, or an undo's outcome
function M.note_changes(run)
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
  local ok, rerr = host.request(method, (table.unpack or unpack)(call))
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
      M.note_changes(r)
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
      -- In place: `require("run_bash").change_runs` is this same table.
      local runs = M.change_runs
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

return M
