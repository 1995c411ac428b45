--- run_bash: the public Lua API.
---
--- The host is a Python process on a msgpack-RPC job channel, started on first use (never at
--- startup). Everything about sandboxes, rules and sessions is decided in Python; the Lua side
--- only moves plain data across.
--- This table is the API; the work is done by:
---   `run_bash.host`      the host's lifecycle (start, exit, restart) and `request`
---   `run_bash.options`   the options sent to the host and the facts it answers with
---   `run_bash.events`    the host's events, the callers waiting on them, the sessions mirror
---   `run_bash.gate`      the gate's answer for a command; held runs and the user's decision
---   `run_bash.sessions`  start, follow, wait on and kill sessions
---   `run_bash.changes`   what a run changed, as a list or a diff, and undoing it
local M = {}

-- No Lua module is loaded from the working directory (`run_bash.lua_path`): before anything else.
require("run_bash.lua_path").drop_relative()

local changes = require("run_bash.changes")
local events = require("run_bash.events")
local gate = require("run_bash.gate")
local host = require("run_bash.host")
local options = require("run_bash.options")
local sessions = require("run_bash.sessions")

--- Sessions the host reported (id -> info), for completion without RPC (see `run_bash.events`).
M.sessions = events.sessions

--- Runs whose change sets the store keeps, newest first, for completion without RPC (see
--- `run_bash.changes`).
M.change_runs = changes.change_runs

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
M.changes = changes.changes
M.change_set = changes.change_set
M.diff = changes.diff
M.undo_plan = changes.undo_plan
M.undo = changes.undo
M.undo_runs = changes.undo_runs
M.undo_usage = changes.undo_usage

M.facts = options.facts
M.facts_cached = options.facts_cached
M.is_running = host.is_running
M.stop = host.stop
M._job = host.job

return M
