--- Pure formatting for the CodeCompanion tool: what the agent reads and what the chat buffer shows.
---
--- No state, no host calls: every function takes data (a run result, a session list, the gate's
--- answer) and returns text, so tests call them directly. The agent-facing markers keep the
--- original plugin's wording (`Success.`, `Failed (exit: N)`, `Session ID: …`).
local M = {}
local H = {}

--- Lines of output shown in the chat buffer (the agent gets the whole capped output).
M.USER_LINES = 40

M.SANDBOX_NOTE =
  'Sandbox active. If result suggests sandbox interference, retry with `"skip_sandbox": true`.'

local fmt = string.format

---@param v any
---@return boolean
local function absent(v)
  return v == nil or v == vim.NIL
end

--- "success" for a run that exited 0 or still runs in the background, else "error".
---@param r table a run result
---@return "success"|"error"
function M.run_status(r)
  if r.status == "running" then
    return "success"
  end
  if r.status == "exited" and r.exit_code == 0 and not r.timed_out and not r.killed then
    return "success"
  end
  return "error"
end

--- Text of CodeCompanion's approval block: what runs, where, and why it asks.
---@param a table the tool's checked arguments
---@param answer table|nil the gate's answer
---@return string
function M.prompt_text(a, answer)
  local verdict = answer or {}
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
    local hits = M.reasons(verdict)
    if #hits <= 1 then
      local why = (not absent(verdict.reason) and verdict.reason ~= "") and verdict.reason
        or "it matches the pause list"
      local rule = not absent(verdict.rule) and fmt(" (rule: %s)", verdict.rule) or ""
      local class = hits[1] and fmt(" [%s]", hits[1].effect) or ""
      table.insert(lines, "Paused: " .. why .. rule .. class)
    else
      table.insert(lines, "Paused: " .. #hits .. " reasons")
      for _, h in ipairs(hits) do
        table.insert(lines, fmt("- %s [%s]", h.reason, h.effect))
      end
    end
    if not absent(verdict.undo_why) and verdict.undo_why ~= "" then
      table.insert(lines, "Undo: " .. verdict.undo_why)
    end
  end
  if not sandboxed then
    if a.skip_sandbox then
      table.insert(lines, "No sandbox: the agent asked to skip it (`skip_sandbox`).")
    elseif not absent(verdict.unavailable) and verdict.unavailable ~= "" then
      table.insert(lines, "No sandbox: " .. verdict.unavailable)
    else
      table.insert(lines, 'No sandbox: `sandbox.backend` is "none".')
    end
  end
  if a.bg_after and a.wait_for then
    table.insert(
      lines,
      fmt("In the background once a line matches `%s` (at most %ss).", a.wait_for, a.bg_after)
    )
  elseif a.bg_after then
    table.insert(lines, fmt("In the background after %ss.", a.bg_after))
  end
  table.insert(lines, "Directory: " .. tostring(absent(verdict.cwd) and "?" or verdict.cwd))
  return table.concat(lines, "\n")
end

--- Every reason the gate's answer gives to pause, with its effect class: `{ {effect, reason} }`
--- (`effect` "reversible": undo takes it back; "irreversible": it does not).
---@param answer table the gate's answer
---@return { effect: string, reason: string }[]
function M.reasons(answer)
  local out = {}
  for _, h in ipairs(type(answer.hits) == "table" and answer.hits or {}) do
    if type(h) == "table" and type(h.reason) == "string" then
      local effect = h.effect == "reversible" and "reversible" or "irreversible"
      table.insert(out, { effect = effect, reason = h.reason })
    end
  end
  return out
end

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

--- The run's change-set line (`Changed files: M src/app.py, …`), or nil when nothing was
--- recorded or nothing changed.
---@param r table a run result or session info
---@return string|nil
function M.changes_line(r)
  local ch = r.changes
  if type(ch) == "table" and type(ch.summary) == "string" and ch.summary ~= "" then
    return ch.summary
  end
  return nil
end

--- `text` (unchanged) followed by the change-set line on a line of its own, after an empty line.
---@param text string
---@param r table
---@return string
function H.with_changes(text, r)
  local line = M.changes_line(r)
  if not line then
    return text
  end
  return text .. (text:sub(-1) == "\n" and "\n" or "\n\n") .. line
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

--- Seconds as people read them: `2.3s`, `42s`, `4m12s`, `1h05m`.
---@param s number|nil
---@return string
function M.duration(s)
  s = tonumber(s) or 0
  if s < 10 then
    return fmt("%.1fs", s)
  elseif s < 60 then
    return fmt("%ds", math.floor(s))
  elseif s < 3600 then
    return fmt("%dm%02ds", math.floor(s / 60), math.floor(s % 60))
  end
  return fmt("%dh%02dm", math.floor(s / 3600), math.floor(s % 3600 / 60))
end

--- How a session ended, in a few words: `exited 1`, `was killed`, `timed out`, `crashed (signal 11)`.
---@param r table session info
---@return string
function M.how_it_ended(r)
  if r.status == "lost" then
    return "was lost (the run_bash host exited)"
  elseif r.timed_out == true then
    return "timed out"
  elseif r.killed == true then
    return "was killed"
  elseif not absent(r.signal) then
    return fmt("crashed (signal %s)", tostring(r.signal))
  end
  return "exited " .. H.exit_text(r)
end

--- The one line that says a background session ended (the chat, `vim.notify`):
--- `run_bash: session abc123 (npm run dev) exited 1 after 4m12s`.
---@param r table session info (the `exited` event)
---@return string
function M.exit_line(r)
  return fmt(
    "run_bash: session %s (%s) %s after %s",
    tostring(r.id),
    H.short_cmd(r.cmd),
    M.how_it_ended(r),
    M.duration(r.duration_s)
  )
end

--- The message the agent reads about a background session that ended: the status and the last
--- lines of its output (the host caps them).
---@param r table session info with `tail`
---@return string
function M.exit_notice(r)
  local lines = {
    fmt(
      "[run_bash] Background session %s (`%s`) %s after %s; it is no longer running.",
      tostring(r.id),
      H.short_cmd(r.cmd),
      M.how_it_ended(r),
      M.duration(r.duration_s)
    ),
    fmt("Session ID: %s", tostring(r.id)),
  }
  if not absent(r.output_file) then
    table.insert(lines, "Output file: " .. r.output_file)
  end
  for _, n in ipairs(H.notes({ notices = r.notices })) do
    table.insert(lines, n)
  end
  if type(r.tail) == "string" and r.tail ~= "" then
    table.insert(lines, "Last lines of output:\n\n" .. r.tail)
  elseif r.tail == "" then
    table.insert(lines, "It printed nothing.")
  end -- no tail at all: the host died with it, and its output with the host
  return table.concat(lines, "\n")
end

--- Seconds as the agent reads them: `2.3`, `30`, `0.0`.
---@param s any
---@return string
function H.secs(s)
  if type(s) ~= "number" then
    return "?"
  end
  local tenths = math.floor(s * 10 + 0.5)
  if tenths >= 10 and tenths % 10 == 0 then
    return fmt("%d", tenths / 10)
  end
  return fmt("%.1f", tenths / 10)
end

--- What became of `wait_for` on a run (nil when there was none).
---@param r table a run result
---@return string|nil
function H.readiness(r)
  if absent(r.wait_for) then
    return nil
  end
  local pattern = fmt('"%s"', r.wait_for)
  if r.ready == "matched" then
    return fmt(
      "Ready: matched %s after %s s: %s",
      pattern,
      H.secs(r.ready_after_s),
      tostring(r.matched_line)
    )
  elseif r.ready == "slow" then
    return fmt(
      "Not ready: stopped matching %s after %s s: the pattern took too long on the output (nested repeats such as `(a+)+` can take exponential time); use a simpler pattern.",
      pattern,
      H.secs(r.ready_after_s)
    )
  elseif r.ready == "exited" then
    return fmt("Not ready: the command ended before a line matched %s.", pattern)
  end
  return fmt("Not ready after %s s (no match for %s).", H.secs(r.ready_after_s), pattern)
end

function H.format_run(r, cmd)
  local sandbox = r.sandboxed == true and (M.SANDBOX_NOTE .. "\n") or ""
  local ready = H.readiness(r)
  local notes = H.notes(r)
  if ready and r.status ~= "running" then
    table.insert(notes, 1, "Note: " .. ready)
  end
  local notes_text = #notes > 0 and (table.concat(notes, "\n") .. "\n") or ""
  local out = H.output_or_placeholder(r.output, "(no output)")
  local title = fmt("**run_bash** `%s` %s", H.short_cmd(cmd or r.cmd), H.status_line(r))
  if r.status == "running" then
    local llm = fmt(
      'Background command started.\n%s%s%sSession ID: %s\nOutput file: %s\nWait for a line or the exit with: {"action": "wait", "session_id": "%s", "wait_for": "<regex>"}\nRead new output with: {"action": "output", "session_id": "%s"}\nKill with: {"action": "kill", "session_id": "%s"}\n\nPartial output:\n\n%s',
      ready and (ready .. "\n") or "",
      sandbox,
      notes_text,
      r.id,
      tostring(r.output_file),
      r.id,
      r.id,
      r.id,
      out
    )
    if ready then
      title = title .. "\n" .. ready
    end
    return llm, H.user_block(title, r.output)
  end
  local bg = r.background == true
      and fmt("Session ID: %s\nOutput file: %s\n", r.id, tostring(r.output_file))
    or ""
  local llm
  if M.run_status(r) == "success" then
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
  return H.with_changes(llm, r), H.with_changes(H.user_block(title, r.output), r)
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
  local user = fmt("**run_bash** killed session `%s` (`%s`)", id, H.short_cmd(r.cmd))
  return H.with_changes(llm, r), H.with_changes(user, r)
end

function H.state(o)
  if o.status == "running" then
    return "still running"
  elseif o.timed_out then
    return fmt("ended: timed out (exit: %s)", H.exit_text(o))
  elseif o.killed then
    return fmt("ended: killed (exit: %s)", H.exit_text(o))
  end
  return fmt("ended (exit: %s)", H.exit_text(o))
end

--- What a `wait` came to, in one line.
function H.wait_outcome(w)
  local id = tostring(w.id or "?")
  local pattern = not absent(w.wait_for) and fmt('"%s"', w.wait_for) or nil
  local waited = H.secs(w.waited_s)
  if w.outcome == "matched" then
    return fmt("Matched %s after %s s: %s", pattern, waited, tostring(w.matched_line))
  elseif w.outcome == "ended" then
    return fmt("Session %s had already ended (exit: %s).", id, H.exit_text(w))
  elseif w.outcome == "exited" then
    return fmt("Session %s %s after %s s of waiting.", id, M.how_it_ended(w), waited)
  elseif w.outcome == "slow" then
    return fmt(
      "Stopped matching %s: the pattern took too long on the output (nested repeats such as `(a+)+` can take exponential time); use a simpler pattern.",
      pattern
    )
  elseif pattern then
    return fmt("No match for %s after %s s.", pattern, waited)
  end
  return fmt("Session %s did not end within %s s.", id, waited)
end

function H.format_wait(w)
  local outcome = H.wait_outcome(w)
  local llm = H.format_output(w)
  local title = fmt("**run_bash** wait on session `%s`: %s", tostring(w.id or "?"), outcome)
  return outcome .. "\n" .. llm, H.user_block(title, w.output)
end

function H.format_output(o, tail)
  local id = tostring(o.id or "?")
  local state = H.state(o)
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
    more = fmt('More output is waiting (%d bytes): call action "output" again.\n', o.unread_bytes)
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
  if o.status ~= "running" then
    return H.with_changes(llm, o), H.with_changes(H.user_block(title, o.output), o)
  end
  return llm, H.user_block(title, o.output)
end

--- A running session's ports, each with where the host reaches it when it is forwarded:
--- `5173 (from the host: 127.0.0.1:40211), 9229`.
function H.ports_text(s)
  local host = {}
  for _, f in ipairs(type(s.forwarded) == "table" and s.forwarded or {}) do
    host[f.port] = f.host_port
  end
  local parts = {}
  for _, p in ipairs(s.ports) do
    local to = host[p]
    table.insert(parts, to and fmt("%s (from the host: 127.0.0.1:%s)", p, to) or tostring(p))
  end
  return table.concat(parts, ", ")
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
        state = state .. ", listening on port " .. H.ports_text(s)
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
  elseif data.action == "wait" and type(data.result) == "table" then
    return H.format_wait(data.result)
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

M._H = H

return M
