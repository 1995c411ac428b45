--- The CodeCompanion tool `run_bash`: schema, approval gate, cmds and output handlers.
---
--- CodeCompanion deep-copies the tool table for every call, so nothing long-lived lives here:
--- sessions belong to the Python host (`require("run_bash")`). The only per-call state is
--- `tool._run_bash` (the checker's verdict from the approval gate, read again by `cmds[1]`).
--- The text formatting functions (`M.format`, `M.format_error`, `M.prompt_text`) are pure, so
--- tests can call them directly.
local M = {}
local H = {}

M.MAX_BG_AFTER = 60
M.MAX_TIMEOUT = 3600
M.DEFAULT_TIMEOUT = 300
M.ACTIONS = { "run", "kill", "output", "list" }

--- Lines of output shown in the chat buffer (the agent gets the whole capped output).
M.USER_LINES = 40

M.SANDBOX_NOTE =
  'Sandbox active. If result suggests sandbox interference, retry with `"skip_sandbox": true`.'

local fmt = string.format

local function rb()
  return require("run_bash")
end

local function absent(v)
  return v == nil or v == vim.NIL
end

-- ── arguments ────────────────────────────────────────────────────────────────────────────────────

---@return number|nil value, string|nil err
function H.number(args, name)
  local v = args[name]
  if absent(v) then
    return nil
  end
  if type(v) == "string" and tonumber(v) then
    v = tonumber(v)
  end
  if type(v) ~= "number" or v ~= v then
    return nil, fmt("`%s` should be a number of seconds, not %s", name, vim.inspect(v))
  end
  return v
end

function H.string(args, name)
  local v = args[name]
  if absent(v) then
    return nil
  end
  if type(v) ~= "string" then
    return nil, fmt("`%s` should be a string, not %s", name, vim.inspect(v))
  end
  return v
end

--- Check and normalise the agent's arguments.
---@param args any
---@return table|nil normalized { action, cmd?, session_id?, bg_after?, timeout?, skip_sandbox?, tail? }
---@return string|nil err a message for the agent
function M.validate(args)
  if absent(args) then
    args = {}
  end
  if type(args) ~= "table" then
    return nil, "the arguments should be a JSON object"
  end
  local out = {}
  local action, err = H.string(args, "action")
  if err then
    return nil, err
  end
  out.action = (action == nil or action == "") and "run" or action
  if not vim.tbl_contains(M.ACTIONS, out.action) then
    return nil,
      fmt("unknown action %q: use one of %s", out.action, table.concat(M.ACTIONS, ", "))
  end

  if out.action == "kill" or out.action == "output" then
    out.session_id, err = H.string(args, "session_id")
    if err then
      return nil, err
    end
    if not out.session_id or vim.trim(out.session_id) == "" then
      return nil, fmt('`session_id` is required for action "%s" (see action "list")', out.action)
    end
    out.session_id = vim.trim(out.session_id)
    if out.action == "output" then
      local tail
      tail, err = H.number(args, "tail")
      if err then
        return nil, (err:gsub(" of seconds", " of lines"))
      end
      if tail ~= nil and (tail < 1 or tail ~= math.floor(tail)) then
        return nil, fmt("`tail` should be a positive whole number of lines, not %s", tail)
      end
      out.tail = tail
    end
    return out
  end
  if out.action == "list" then
    return out
  end

  out.cmd, err = H.string(args, "cmd")
  if err then
    return nil, err
  end
  if not out.cmd or vim.trim(out.cmd) == "" then
    return nil, '`cmd` is required for action "run"'
  end
  out.bg_after, err = H.number(args, "bg_after")
  if err then
    return nil, err
  end
  if out.bg_after and out.bg_after > M.MAX_BG_AFTER then
    return nil,
      fmt("`bg_after` cannot exceed %d seconds, not %s", M.MAX_BG_AFTER, tostring(out.bg_after))
  end
  if out.bg_after and out.bg_after < 0 then
    return nil,
      fmt(
        "`bg_after` must be 0 (foreground) or 1..%d seconds, not %s",
        M.MAX_BG_AFTER,
        tostring(out.bg_after)
      )
  end
  if out.bg_after == 0 then
    out.bg_after = nil -- 0 means foreground, as in the original plugin
  end
  out.timeout, err = H.number(args, "timeout")
  if err then
    return nil, err
  end
  if out.timeout and (out.timeout <= 0 or out.timeout > M.MAX_TIMEOUT) then
    return nil,
      fmt("`timeout` must be 1..%d seconds, not %s", M.MAX_TIMEOUT, tostring(out.timeout))
  end
  local skip = args.skip_sandbox
  if absent(skip) then
    skip = false
  end
  if type(skip) ~= "boolean" then
    return nil, fmt("`skip_sandbox` should be true or false, not %s", vim.inspect(skip))
  end
  out.skip_sandbox = skip
  return out
end

-- ── approval ─────────────────────────────────────────────────────────────────────────────────────

--- Per-call state kept on the (deep-copied) tool table.
function H.state(tool)
  tool._run_bash = tool._run_bash or {}
  return tool._run_bash
end

function H.audit(cmd, verdict, decided_by, reason)
  pcall(require("run_bash.audit_log").decision, cmd, verdict, decided_by, reason, "agent")
end

--- Where a command would run, from the host: { sandboxed, backend, unavailable } or nil, err.
function M.availability()
  local v, err = rb().check("true")
  if not v then
    return nil, err
  end
  return { sandboxed = v.sandboxed == true, backend = v.backend, unavailable = v.unavailable }
end

--- `require_approval_before(tool, tools)`: kill/output/list never ask; a command that would run
--- without a sandbox always asks; a sandboxed one asks only when the pause list says so.
---@return boolean
function M.needs_approval(tool, _tools)
  local st = H.state(tool)
  local a = M.validate(tool.args)
  if not a or a.action ~= "run" then
    return false -- bad arguments are reported by cmds[1]; nothing runs
  end
  local verdict, err = rb().check(a.cmd, { skip_sandbox = a.skip_sandbox })
  if not verdict then
    st.check_error = err -- cmds[1] reports it and runs nothing
    return false
  end
  st.verdict = verdict
  st.asked = (verdict.sandboxed ~= true) or verdict.pause == true
  if not st.asked then
    H.audit(a.cmd, verdict, "auto")
  end
  return st.asked
end

--- The key CodeCompanion stores "Always accept" under: the command, marked when it runs unsandboxed,
--- so accepting `cmd` in the sandbox never accepts it without.
function M.cmd_string(tool)
  local st = H.state(tool)
  local a = M.validate(tool.args)
  if not a then
    return "run_bash (invalid arguments)"
  end
  if a.action ~= "run" then
    return fmt("%s %s", a.action, a.session_id or "")
  end
  if st.asked then
    -- Called again after the prompt only by "Always accept".
    st.always = true
  end
  local unsandboxed
  if st.verdict then
    unsandboxed = st.verdict.sandboxed ~= true
  else
    unsandboxed = a.skip_sandbox or tool._sandbox_available ~= true
  end
  return unsandboxed and ("[no sandbox] " .. a.cmd) or a.cmd
end

--- Text of CodeCompanion's approval block: what runs, where, and why it paused.
---@param a table validated args
---@param verdict table|nil
function M.prompt_text(a, verdict)
  verdict = verdict or {}
  local sandboxed = verdict.sandboxed == true
  local fence = H.fence(a.cmd)
  local lines = {
    sandboxed and fmt("Run the following Bash command (IN sandbox: %s)?", verdict.backend or "?")
      or "Run the following Bash command (WITHOUT sandbox)?",
    fence .. "bash",
  }
  vim.list_extend(lines, vim.split(a.cmd, "\n", { plain = true }))
  table.insert(lines, fence)
  if verdict.pause == true then
    local why = (not absent(verdict.reason) and verdict.reason ~= "") and verdict.reason
      or "it matches the pause list"
    local rule = not absent(verdict.rule) and fmt(" (rule: %s)", verdict.rule) or ""
    table.insert(lines, "Paused: " .. why .. rule)
  end
  if not sandboxed then
    if a.skip_sandbox then
      table.insert(lines, "No sandbox: the agent asked to skip it (`skip_sandbox`).")
    elseif not absent(verdict.unavailable) and verdict.unavailable ~= "" then
      table.insert(lines, "No sandbox: " .. verdict.unavailable)
    else
      table.insert(lines, "No sandbox: `sandbox.backend` is \"none\".")
    end
  end
  if a.bg_after then
    table.insert(lines, fmt("In the background after %ss.", a.bg_after))
  end
  table.insert(lines, "Directory: " .. vim.fn.getcwd())
  return table.concat(lines, "\n")
end

-- ── running ──────────────────────────────────────────────────────────────────────────────────────

--- Whether CodeCompanion skipped our gate because the user chose "Always accept" for this key.
function H.cached_approval(tools, tool)
  local ok, approvals = pcall(require, "codecompanion.interactions.chat.tools.approvals")
  if not ok or type(approvals) ~= "table" or not tools or not tools.bufnr then
    return false
  end
  local aok, yes = pcall(approvals.is_approved, approvals, tools.bufnr, {
    cmd = M.cmd_string(tool),
    tool_name = tool.name or "run_bash",
  })
  return aok and yes == true
end

--- Decide how a `run` proceeds: returns { decided_by?, unsandboxed_ok } or nil, err.
function H.authorise(tools, tool, a)
  local st = H.state(tool)
  if st.check_error then
    return nil, "could not check the command: " .. tostring(st.check_error)
  end
  if st.verdict then
    if not st.asked then
      return { unsandboxed_ok = false } -- "auto" was recorded by the gate
    end
    return {
      decided_by = st.always and "user_always" or "user_accept",
      unsandboxed_ok = st.verdict.sandboxed ~= true,
    }
  end
  -- The gate did not run: CodeCompanion found a cached approval, or nothing asked at all.
  -- The key CodeCompanion looked up (before any verdict existed).
  local key = M.cmd_string(tool)
  local verdict, err = rb().check(a.cmd, { skip_sandbox = a.skip_sandbox })
  if not verdict then
    return nil, "could not check the command: " .. tostring(err)
  end
  if verdict.sandboxed == true and not verdict.pause then
    st.verdict = verdict
    return { decided_by = "auto", unsandboxed_ok = false }
  end
  local cached = H.cached_approval(tools, tool)
  st.verdict = verdict
  if cached then
    -- Without a sandbox only when the cached approval was for running without one.
    return { decided_by = "user_always_cached", unsandboxed_ok = vim.startswith(key, "[no sandbox] ") }
  end
  return nil, "this command needs the user's approval, which was not given; nothing ran"
end

function H.run_status(r)
  if r.status == "running" then
    return "success"
  end
  if r.status == "exited" and r.exit_code == 0 and not r.timed_out and not r.killed then
    return "success"
  end
  return "error"
end

--- `cmds[1]`: returns nil and calls `opts.output_cb` exactly once, from the main loop.
function M.execute(tools, args, opts)
  opts = opts or {}
  local tool = (type(tools) == "table" and type(tools.tool) == "table") and tools.tool or {}
  local sent = false
  local function finish(status, data)
    if sent then
      return
    end
    sent = true
    vim.schedule(function()
      if opts.output_cb then
        opts.output_cb({ status = status, data = data })
      end
    end)
  end

  local a, err = M.validate(args)
  if not a then
    finish("error", { error = err })
    return nil
  end

  if a.action == "list" then
    local list, lerr = rb().sessions_list()
    if not list then
      finish("error", { action = "list", error = lerr })
    else
      finish("success", { action = "list", sessions = list })
    end
    return nil
  end

  if a.action == "output" then
    local o, oerr = rb().output(a.session_id, a.tail and { tail = a.tail } or nil)
    if not o then
      finish("error", { action = "output", error = oerr })
    else
      finish("success", { action = "output", info = o, tail = a.tail })
    end
    return nil
  end

  if a.action == "kill" then
    local info, kerr = rb().kill(a.session_id, function(reply)
      if reply.error then
        finish("error", { action = "kill", error = reply.error })
      else
        finish("success", { action = "kill", result = reply.result or {} })
      end
    end)
    if not info then
      finish("error", { action = "kill", error = kerr })
    end
    return nil
  end

  local auth, aerr = H.authorise(tools, tool, a)
  if not auth then
    finish("error", { action = "run", error = aerr })
    return nil
  end
  local st = H.state(tool)
  if auth.decided_by then
    H.audit(a.cmd, st.verdict, auth.decided_by)
  end
  local spec = {
    cmd = a.cmd,
    cwd = vim.fn.getcwd(),
    timeout = a.timeout,
    bg_after = a.bg_after,
    skip_sandbox = a.skip_sandbox,
    approved = true, -- the gate above (CodeCompanion's approval) has decided
    unsandboxed_ok = auth.unsandboxed_ok,
  }
  local info, rerr = rb().run(spec, function(result)
    if result.error then
      finish("error", { action = "run", error = result.error })
    else
      finish(H.run_status(result), { action = "run", result = result })
    end
  end)
  if not info then
    finish("error", { action = "run", error = rerr })
    return nil
  end
  st.session_id = info.id
  if type(opts.register_job) == "function" then
    -- Stopping the chat stops the whole run (every process in its sandbox).
    opts.register_job({
      id = info.id,
      kill = function()
        rb().kill(info.id)
      end,
    })
  end
  return nil
end

-- ── text ─────────────────────────────────────────────────────────────────────────────────────────

--- A backtick fence longer than any run of backticks in `text`.
function H.fence(text)
  local longest = 0
  for run in tostring(text or ""):gmatch("`+") do
    longest = math.max(longest, #run)
  end
  return string.rep("`", math.max(4, longest + 1))
end

function H.exit_text(r)
  if not absent(r.exit_code) then
    return tostring(r.exit_code)
  end
  if not absent(r.signal) then
    return tostring(128 + r.signal)
  end
  return "UNKNOWN"
end

--- Lines that tell the agent about truncation, leftovers and notices.
function H.notes(r)
  local lines = {}
  for _, n in ipairs(type(r.notices) == "table" and r.notices or {}) do
    table.insert(lines, "Note: " .. n)
  end
  if (tonumber(r.leftovers) or 0) > 0 then
    table.insert(
      lines,
      fmt(
        "Note: %d process(es) the command left running (e.g. with `&`) were stopped; use `bg_after` to keep a process running.",
        r.leftovers
      )
    )
  end
  if r.killed and not r.timed_out then
    table.insert(lines, "Note: the command was killed.")
  end
  if r.truncated == true then
    table.insert(
      lines,
      fmt(
        "Note: output truncated (%s bytes in total%s); the full output is in the output file.",
        tostring(r.output_bytes or "?"),
        r.file_capped == true and ", the file itself was capped" or ""
      )
    )
  end
  if r.truncated == true and not absent(r.output_file) and not r.background then
    table.insert(lines, "Output file: " .. r.output_file)
  end
  return lines
end

function H.output_or_placeholder(text, placeholder)
  if absent(text) or text == "" then
    return placeholder
  end
  return text
end

function H.short_cmd(cmd)
  cmd = tostring(cmd or "")
  local first = cmd:match("^[^\n]*") or ""
  if #first > 80 then
    first = first:sub(1, 77) .. "..."
  elseif first ~= cmd then
    first = first .. " ..."
  end
  return (first:gsub("`", "'"))
end

--- The chat-buffer view: a summary line and the last lines of output in a fenced block.
function H.user_block(title, text)
  local lines = vim.split(text or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  if #lines == 0 then
    return title
  end
  local hidden = #lines - M.USER_LINES
  if hidden > 0 then
    lines = vim.list_slice(lines, hidden + 1)
    table.insert(lines, 1, fmt("[... %d earlier line(s) ...]", hidden))
  end
  local body = table.concat(lines, "\n")
  local fence = H.fence(body)
  return fmt("%s\n%s\n%s\n%s", title, fence, body, fence)
end

function H.status_line(r)
  local ok, commands = pcall(require, "run_bash.commands")
  if ok and type(commands.status_line) == "function" then
    local sok, line = pcall(commands.status_line, r)
    if sok then
      return line
    end
  end
  return fmt("[%s]", tostring(r.status))
end

function H.format_run(r, cmd)
  local sandbox = r.sandboxed == true and (M.SANDBOX_NOTE .. "\n") or ""
  local notes = H.notes(r)
  local notes_text = #notes > 0 and (table.concat(notes, "\n") .. "\n") or ""
  local out = H.output_or_placeholder(r.output, "(no output)")
  local title = fmt("**run_bash** `%s` %s", H.short_cmd(cmd or r.cmd), H.status_line(r))
  if r.status == "running" then
    local llm = fmt(
      'Background command started.\n%s%sSession ID: %s\nOutput file: %s\nRead new output with: {"action": "output", "session_id": "%s"}\nKill with: {"action": "kill", "session_id": "%s"}\n\nPartial output:\n\n%s',
      sandbox,
      notes_text,
      r.id,
      tostring(r.output_file),
      r.id,
      r.id,
      out
    )
    return llm, H.user_block(title, r.output)
  end
  local bg = r.background == true
      and fmt("Session ID: %s\nOutput file: %s\n", r.id, tostring(r.output_file))
    or ""
  local llm
  if H.run_status(r) == "success" then
    llm = fmt("Success.\n%s%s%sOutput:\n\n%s", sandbox, notes_text, bg, out)
  else
    llm = fmt(
      "Failed (exit: %s)%s.\n%s%s%sOutput:\n\n%s",
      H.exit_text(r),
      r.timed_out and " (timed out)" or "",
      sandbox,
      notes_text,
      bg,
      out
    )
  end
  return llm, H.user_block(title, r.output)
end

function H.format_kill(r)
  local id = tostring(r.id or "?")
  local file = tostring(r.output_file or "?")
  if r.already_ended then
    local llm = fmt(
      "Session %s already exited (code: %s).\nOutput file preserved at: %s",
      id,
      H.exit_text(r),
      file
    )
    local notes = H.notes({ notices = r.notices })
    if #notes > 0 then
      llm = llm .. "\n" .. table.concat(notes, "\n")
    end
    return llm, fmt("**run_bash** session `%s` had already ended %s", id, H.status_line(r))
  end
  local llm = fmt(
    "Killed background session %s (PID %s).\nOutput file preserved at: %s",
    id,
    tostring(r.pid or "?"),
    file
  )
  local notes = H.notes({ leftovers = r.leftovers, notices = r.notices })
  if #notes > 0 then
    llm = llm .. "\n" .. table.concat(notes, "\n")
  end
  return llm, fmt("**run_bash** killed session `%s` (`%s`)", id, H.short_cmd(r.cmd))
end

function H.format_output(o, tail)
  local id = tostring(o.id or "?")
  local state
  if o.status == "running" then
    state = "still running"
  elseif o.timed_out then
    state = fmt("ended: timed out (exit: %s)", H.exit_text(o))
  elseif o.killed then
    state = fmt("ended: killed (exit: %s)", H.exit_text(o))
  else
    state = fmt("ended (exit: %s)", H.exit_text(o))
  end
  local what = tail and fmt("Last %d line(s)", tail) or "New output since the last read"
  local more = ""
  if o.status ~= "running" then
    -- What the backend reported at the end (e.g. a protected file restored) is news here.
    local notes = H.notes({ notices = o.notices })
    if #notes > 0 then
      more = table.concat(notes, "\n") .. "\n"
    end
  end
  if (tonumber(o.unread_bytes) or 0) > 0 then
    more = fmt("More output is waiting (%d bytes): call action \"output\" again.\n", o.unread_bytes)
  end
  local llm = fmt(
    "Session %s: %s.\nSession ID: %s\nOutput file: %s\n%s%s:\n\n%s",
    id,
    state,
    id,
    tostring(o.output_file or "?"),
    more,
    what,
    H.output_or_placeholder(o.output, tail and "(no output)" or "(no new output)")
  )
  local title = fmt("**run_bash** output of session `%s` (%s)", id, state)
  return llm, H.user_block(title, o.output)
end

function H.format_list(list)
  if #list == 0 then
    return "No sessions.", "**run_bash**: no sessions"
  end
  local lines = { "Sessions (oldest first):" }
  for _, s in ipairs(list) do
    local state
    if s.status == "running" then
      state = fmt("running%s, %ss", s.background and " in the background" or "", s.age_s or "?")
      if type(s.ports) == "table" and #s.ports > 0 then
        state = state .. ", listening on port " .. table.concat(s.ports, ", ")
      end
    else
      state = fmt("%s (exit: %s)", s.status, H.exit_text(s))
    end
    table.insert(
      lines,
      fmt(
        "- %s: %s, %s: %s",
        s.id,
        state,
        s.sandboxed and ("sandbox " .. tostring(s.backend)) or "no sandbox",
        H.short_cmd(s.cmd)
      )
    )
    for _, n in ipairs(type(s.notices) == "table" and s.notices or {}) do
      table.insert(lines, "  Note: " .. n)
    end
  end
  local text = table.concat(lines, "\n")
  return text, H.user_block("**run_bash** sessions", text)
end

--- Format one `output_cb` payload into (text for the agent, text for the chat buffer).
---@param data any a `data` table from `cmds[1]`, or an error string
---@param args? table the tool's args (for the command text)
---@return string for_llm, string for_user
function M.format(data, args)
  if type(data) ~= "table" then
    return M.format_error(data)
  end
  if data.error then
    return M.format_error(data)
  end
  local cmd = type(args) == "table" and type(args.cmd) == "string" and args.cmd or nil
  if data.action == "run" and type(data.result) == "table" then
    return H.format_run(data.result, cmd)
  elseif data.action == "kill" and type(data.result) == "table" then
    return H.format_kill(data.result)
  elseif data.action == "output" and type(data.info) == "table" then
    return H.format_output(data.info, data.tail)
  elseif data.action == "list" and type(data.sessions) == "table" then
    return H.format_list(data.sessions)
  end
  return M.format_error(vim.inspect(data))
end

--- An error for the agent: one clear message.
function M.format_error(item)
  local msg
  if type(item) == "table" then
    if item.error ~= nil then
      msg = tostring(item.error)
    elseif item.result or item.action then
      return M.format(item)
    else
      msg = vim.inspect(item)
    end
  elseif item == nil or item == vim.NIL then
    msg = "unknown error"
  else
    msg = tostring(item)
  end
  local llm = "Error: " .. msg
  return llm, "**run_bash** error: " .. msg:gsub("\n.*", " ...")
end

-- ── the tool table ───────────────────────────────────────────────────────────────────────────────

function H.description(avail)
  local parts = {
    "Runs a Bash command (`bash -c`) and returns its output (stdout and stderr merged, in order) and exit status.",
  }
  if avail and avail.sandboxed then
    table.insert(
      parts,
      fmt(
        [[
Sandboxed by %s (default): commands can read most of the system but write only to the project, temp and build-cache directories; secrets (SSH/GPG keys, keyrings, tokens) are hidden and the network may be limited. They run without asking unless they match the pause list (e.g. `rm -r`, `git reset --hard`, `git push --force`), which asks the user first.
Sandbox denials look like ordinary errors: "Permission denied", "Operation not permitted", "Read-only file system", network failures, or exit codes > 128. If the sandbox blocks legitimate work, retry with `"skip_sandbox": true`: it always asks the user. Reuse the identical `cmd` when retrying (unless the user rejected it).]],
        avail.backend or "the sandbox"
      )
    )
  else
    local why = ""
    if avail and type(avail.unavailable) == "string" and avail.unavailable ~= "" then
      why = fmt(" (%s)", avail.unavailable)
    end
    table.insert(
      parts,
      fmt(
        "No sandbox is available%s: every command asks the user for approval first. Reuse the identical `cmd` when retrying (unless the user rejected it).",
        why
      )
    )
  end
  table.insert(
    parts,
    fmt(
      [[
Output: ANSI codes removed; long output is cut in the middle and the full output kept in a file whose path is given. stdin is empty: commands must not wait for input.
Foreground (default): waits for the command; `timeout` (seconds, default %d, max %d) kills it and reports "(timed out)".
Background: `"bg_after": N` (1-%d) starts the command detached, waits N seconds (less if it exits), then returns the output so far, a `session_id` and the output file. Use it for servers, watchers and anything long-running.
Other actions:
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
      M.DEFAULT_TIMEOUT,
      M.MAX_TIMEOUT,
      M.MAX_BG_AFTER
    )
  )
  return table.concat(parts, "\n")
end

--- The JSON schema the agent sees.
---@param avail? { sandboxed: boolean, backend?: string }
function M.schema(avail)
  local props = {
    cmd = {
      type = "string",
      description = "Bash command to run. Multi-line scripts, pipes and redirections are fine. Required when action is 'run'.",
    },
    action = {
      type = "string",
      enum = vim.deepcopy(M.ACTIONS),
      description = "'run' (default): run `cmd`. 'kill': stop a background session. 'output': new output of a session since the last read. 'list': the sessions.",
    },
    session_id = {
      type = "string",
      description = "Session ID for action 'kill' or 'output'.",
    },
    bg_after = {
      type = "integer",
      description = fmt(
        "Background mode: seconds to wait before returning. <= 0: foreground (default). > 0: run detached; the tool returns after this many seconds with the output so far, a session_id and the output file. Max %d.",
        M.MAX_BG_AFTER
      ),
    },
    timeout = {
      type = "integer",
      description = fmt(
        "Timeout in seconds for a foreground command. Default %d, max %d.",
        M.DEFAULT_TIMEOUT,
        M.MAX_TIMEOUT
      ),
    },
    tail = {
      type = "integer",
      description = "For action 'output': return the last N lines of the session's output instead of the new output.",
    },
  }
  if avail and avail.sandboxed then
    props.skip_sandbox = {
      type = "boolean",
      description = "Set true to run without the sandbox (always asks the user). Only when the sandbox blocks legitimate work.",
    }
  end
  return {
    type = "function",
    ["function"] = {
      name = "run_bash",
      description = H.description(avail),
      parameters = {
        type = "object",
        properties = props,
        required = {},
        additionalProperties = false,
      },
    },
  }
end

function H.last(list)
  if type(list) == "table" and not getmetatable(list) and #list > 0 then
    return list[#list]
  end
  return list
end

--- Output handlers (self = the prepared tool, with self.args).
M.output = {
  cmd_string = function(self, _meta)
    return M.cmd_string(self)
  end,

  prompt = function(self, _meta)
    local a, err = M.validate(self.args)
    if not a or a.action ~= "run" then
      return fmt("Run the run_bash tool (%s)?", err or a.action)
    end
    return M.prompt_text(a, H.state(self).verdict)
  end,

  success = function(self, stdout, meta)
    local for_llm, for_user = M.format(H.last(stdout), self.args)
    meta.tools.chat:add_tool_output(self, for_llm, for_user)
  end,

  -- CodeCompanion's stderr list spans the whole round: this call's error is the last element.
  error = function(self, stderr, meta)
    local for_llm, for_user = M.format(H.last(stderr), self.args)
    meta.tools.chat:add_tool_output(self, for_llm, for_user)
  end,

  rejected = function(self, meta)
    local reason = meta and meta.opts and meta.opts.reason
    if absent(reason) or vim.trim(tostring(reason)) == "" then
      reason = nil
    end
    local a = M.validate(self.args)
    if a and a.cmd then
      H.audit(a.cmd, H.state(self).verdict, "user_reject", reason)
    end
    meta.tools.chat:add_tool_output(
      self,
      "User rejected: " .. (reason or "no reason given"),
      fmt(
        "**run_bash** rejected `%s`%s",
        H.short_cmd(a and a.cmd or ""),
        reason and (": " .. reason) or ""
      )
    )
  end,

  cancelled = function(self, meta)
    local st = H.state(self)
    local a = M.validate(self.args)
    if st.asked and not st.session_id and a and a.cmd then
      H.audit(a.cmd, st.verdict, "user_cancel")
    end
    meta.tools.chat:add_tool_output(
      self,
      "The user cancelled the execution of the run_bash tool"
        .. (st.session_id and fmt(" (session %s was stopped)", st.session_id) or ""),
      fmt("**run_bash** cancelled `%s`", H.short_cmd(a and a.cmd or ""))
    )
  end,
}

--- The tool table (a fresh one for every call; the schema reflects whether a sandbox is available).
function M.create()
  local avail = M.availability()
  return {
    name = "run_bash",
    schema = M.schema(avail),
    cmds = { M.execute },
    output = M.output,
    _sandbox_available = avail and avail.sandboxed or false,
  }
end

--- The entry for `config.interactions.chat.tools.run_bash`.
function M.config_entry()
  return {
    callback = function()
      return M.create()
    end,
    description = "Run a Bash command, sandboxed (pause list for risky commands; background sessions)",
    opts = {
      require_cmd_approval = true,
      allowed_in_yolo_mode = false,
      require_approval_before = function(tool, tools)
        return M.needs_approval(tool, tools)
      end,
    },
  }
end

M._H = H

return M
