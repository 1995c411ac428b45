--- The schema and description of the CodeCompanion tool, built from setup's reply.
---
--- The host's `facts` (where commands run, the default timeout and the limits) are the only source
--- of the numbers and of what the description says about the sandbox. When the host cannot start
--- the description says so, with the fix: it is never described as "no sandbox".
local M = {}
local H = {}

local fmt = string.format

M.ACTIONS = { "run", "kill", "output", "list", "wait" }

---@class run_bash.Facts
---@field backend string
---@field sandboxed boolean
---@field unavailable string
---@field chosen_because? string how the backend was chosen (`auto: sandlock works here (…)`)
---@field backend_error? string a backend named explicitly does not work here
---@field default_timeout integer
---@field max_timeout integer
---@field max_bg_after integer
---@field max_wait integer
---@field default_wait integer
---@field notify_agent "next_turn"|"submit"|false
---@field config_error? string why the user's latest options were rejected

--- The first paragraph: what runs where, or why nothing can run.
---@param facts run_bash.Facts|nil
---@param err string|nil why there are no facts (the host did not start)
---@return string
function H.where(facts, err)
  if not facts then
    return fmt(
      "The run_bash tool is not working right now: %s. Do not retry and do not work around it: tell the user, who can fix it (`:checkhealth run_bash` shows what is wrong).",
      err or "the Python host did not answer"
    )
  end
  if type(facts.backend_error) == "string" then
    return fmt(
      'The sandbox the user configured does not work here: %s. Commands that want the sandbox fail; do not work around it: tell the user, who can fix it (`:checkhealth run_bash`). `"skip_sandbox": true` runs a command without the sandbox and always asks the user first.',
      facts.backend_error
    )
  end
  if facts.sandboxed then
    return fmt(
      [[
Sandboxed by %s (default): commands can read most of the system but write only to the project, temp and build-cache directories; secrets (SSH/GPG keys, keyrings, tokens) are hidden and the network may be limited. They run without asking unless they match the pause list (e.g. `rm -r`, `git reset --hard`, `git push --force`), which asks the user first.
Sandbox denials look like ordinary errors: "Permission denied", "Operation not permitted", "Read-only file system", network failures, or exit codes > 128. If the sandbox blocks legitimate work, retry with `"skip_sandbox": true`: it always asks the user. Reuse the identical `cmd` when retrying (unless the user rejected it).]],
      facts.backend
    )
  end
  local why = (type(facts.unavailable) == "string" and facts.unavailable ~= "")
      and fmt(" (%s)", facts.unavailable)
    or ""
  return fmt(
    "No sandbox is available%s: every command asks the user for approval first. Reuse the identical `cmd` when retrying (unless the user rejected it).",
    why
  )
end

--- What the agent is told about background sessions that end.
---@param mode any `background.notify_agent`
---@return string
function H.told(mode)
  if mode == false then
    return "You are not told when a background session ends: check with `wait` or `list`."
  end
  return "When a background session you started ends, you are told (its exit status and last lines) with the next message."
end

--- The description the agent reads.
---@param facts run_bash.Facts|nil
---@param err? string
---@return string
function M.description(facts, err)
  local limits = facts or {}
  local parts = {
    "Runs a Bash command (`bash -c`) and returns its output (stdout and stderr merged, in order) and exit status.",
    H.where(facts, err),
  }
  if facts and type(facts.config_error) == "string" then
    table.insert(
      parts,
      fmt(
        "Note: the user's run_bash options were rejected (%s); the previous options are in force. If a command behaves unexpectedly, tell the user.",
        facts.config_error
      )
    )
  end
  table.insert(
    parts,
    fmt(
      [[
Output: ANSI codes removed; long output is cut in the middle and the full output kept in a file whose path is given. stdin is empty: commands must not wait for input.
Foreground (default): waits for the command; `timeout` (seconds, default %s, max %s) kills it and reports "(timed out)".
Background: `"bg_after": N` (1-%s) starts the command detached, waits N seconds (less if it exits), then returns the output so far, a `session_id` and the output file. Use it for servers, watchers and anything long-running.
Start a server or watcher with `bg_after` plus `wait_for` (a Python regular expression for its ready line, e.g. "Listening on|ready in"): the result comes as soon as a line matches, and says whether it did. Later, use {"action": "wait", "session_id": "...", "wait_for": "..."} to wait for the next matching line or the exit instead of polling "output".
%s
Other actions:
- {"action": "wait", "session_id": "...", "wait_for": "...", "timeout": N}: wait up to N seconds (1-%s, default %s) for a line of new output to match `wait_for` (one line at a time), or without `wait_for` for the session to end; returns the new output.
- {"action": "output", "session_id": "..."}: new output of a session since the last read (add "tail": N for its last N lines instead).
- {"action": "kill", "session_id": "..."}: stop a session and every process it started.
- {"action": "list"}: the sessions and their state.

MUST rules:
- Use `bg_after > 0` to run in the background; NEVER use `&`, `nohup`, `setsid` or `disown`: processes left behind are stopped when the command ends.
- Kill every background session you started once you no longer need it.
- STOP and ask the user on authentication errors (password or token prompts, 401/403, "Permission denied (publickey)"). Never look for credentials, tokens or keys.

Safety:
- Do not run destructive commands (rm -rf, formatting disks, changing system configuration).
- Do not install software globally (sudo, apt-get, npm install -g, pip install outside a virtualenv).
- Do not download from untrusted URLs.
- Never print or send secrets or personal data (passwords, tokens, shell history).
- Prefer read-only commands; write only inside the project.]],
      limits.default_timeout or "?",
      limits.max_timeout or "?",
      limits.max_bg_after or "?",
      H.told(limits.notify_agent),
      limits.max_wait or "?",
      limits.default_wait or "?"
    )
  )
  return table.concat(parts, "\n")
end

--- The JSON schema the agent sees.
---@param facts run_bash.Facts|nil setup's reply; nil when the host is broken
---@param err? string why `facts` is nil
---@return table
function M.schema(facts, err)
  local limits = facts or {}
  local props = {
    cmd = {
      type = "string",
      description = "Bash command to run. Multi-line scripts, pipes and redirections are fine. Required when action is 'run'.",
    },
    action = {
      type = "string",
      enum = vim.deepcopy(M.ACTIONS),
      description = "'run' (default): run `cmd`. 'kill': stop a background session. 'output': new output of a session since the last read. 'list': the sessions. 'wait': wait for a session's next matching line (`wait_for`) or its end.",
    },
    session_id = {
      type = "string",
      description = "Session ID for action 'kill', 'output' or 'wait'.",
    },
    wait_for = {
      type = "string",
      description = "Python regular expression searched in each line of output as it arrives. With 'run' (needs bg_after): return as soon as a line matches. With 'wait': return when a line of new output matches.",
    },
    bg_after = {
      type = "integer",
      description = fmt(
        "Background mode: seconds to wait before returning. <= 0: foreground (default). > 0: run detached; the tool returns after this many seconds (sooner when a line matches `wait_for` or the command exits) with the output so far, a session_id and the output file. Max %s.",
        limits.max_bg_after or "?"
      ),
    },
    timeout = {
      type = "integer",
      description = fmt(
        "Seconds. For 'run': the time limit of a foreground command (default %s, max %s). For 'wait': how long to wait (1-%s, default %s).",
        limits.default_timeout or "?",
        limits.max_timeout or "?",
        limits.max_wait or "?",
        limits.default_wait or "?"
      ),
    },
    tail = {
      type = "integer",
      description = "For action 'output': return the last N lines of the session's output instead of the new output.",
    },
  }
  if facts and facts.sandboxed then
    props.skip_sandbox = {
      type = "boolean",
      description = "Set true to run without the sandbox (always asks the user). Only when the sandbox blocks legitimate work.",
    }
  end
  return {
    type = "function",
    ["function"] = {
      name = "run_bash",
      description = M.description(facts, err),
      parameters = {
        type = "object",
        properties = props,
        required = {},
        additionalProperties = false,
      },
    },
  }
end

return M
