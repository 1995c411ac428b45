--- Ex-commands: :RunBash, :RunBashSessions, :RunBashKill, :RunBashOutput, :RunBashLog,
--- :RunBashChanges, :RunBashUndo (the last two are rendered by `run_bash.undo`).
local M = {}
local H = {}

local MAX_BUF_LINES = 20000
H.followers = {} -- session id -> the :RunBashOutput buffer's output callback
H.announced = {} -- background sessions of :RunBash whose end is announced with vim.notify

local function rb()
  return require("run_bash")
end

---@param msg string
function H.err(msg)
  rb().notify(msg, vim.log.levels.ERROR)
end

--- The window run_bash opened for output in this tab page, if it is still there.
function H.output_window()
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.w[win].run_bash_output then
      return win
    end
  end
end

--- Open (or reuse) the scratch buffer named `name` in run_bash's output split (one per tab page,
--- reused by later runs); returns bufnr.
---@param name string
---@param filetype? string
---@return integer bufnr
function H.open_scratch(name, filetype)
  local buf = H.find_buffer(name)
  if buf == -1 or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
  end
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
  vim.bo[buf].filetype = filetype or "run_bash"
  local win = vim.fn.bufwinid(buf)
  if win == -1 then
    win = H.output_window()
    if win then
      vim.api.nvim_win_set_buf(win, buf)
      vim.api.nvim_set_current_win(win)
    elseif pcall(vim.cmd, "botright sbuffer " .. buf) then
      vim.w.run_bash_output = true
      pcall(vim.cmd, "resize " .. math.min(15, math.floor(vim.o.lines / 3)))
    else
      -- No room for another split (E36): show it in the current window instead.
      vim.api.nvim_win_set_buf(0, buf)
    end
  else
    vim.api.nvim_set_current_win(win)
  end
  vim.keymap.set("n", "q", "<Cmd>close<CR>", { buffer = buf, nowait = true, desc = "Close" })
  return buf
end
M.open_scratch = H.open_scratch

--- The buffer named exactly `name` (not a pattern match: `run_bash://abc` must not find
--- `run_bash://abc/changes`), or -1.
---@param name string
---@return integer
function H.find_buffer(name)
  local full = vim.fn.fnamemodify(name, ":p")
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    local n = vim.api.nvim_buf_get_name(b)
    if n == name or n == full then
      return b
    end
  end
  return -1
end

--- Append `text` to `buf`, continuing its last line; keeps at most MAX_BUF_LINES lines.
---@param buf integer
---@param text string
function H.append(buf, text)
  if not vim.api.nvim_buf_is_valid(buf) or text == "" then
    return
  end
  local lines = vim.split(text, "\n", { plain = true })
  local last = vim.api.nvim_buf_line_count(buf)
  local tail = vim.api.nvim_buf_get_lines(buf, last - 1, last, false)[1] or ""
  lines[1] = tail .. lines[1]
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, last - 1, last, false, lines)
  local count = vim.api.nvim_buf_line_count(buf)
  if count > MAX_BUF_LINES then
    vim.api.nvim_buf_set_lines(
      buf,
      1,
      count - MAX_BUF_LINES + 1,
      false,
      { "[… earlier lines trimmed …]" }
    )
  end
  vim.bo[buf].modifiable = false
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win ~= vim.api.nvim_get_current_win() then
      pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(buf), 0 })
    end
  end
end

--- The lines that end an output buffer: the run's notices, then its status line.
---@param r table a run result
---@return string
function M.end_lines(r)
  local lines = {}
  for _, n in ipairs(type(r.notices) == "table" and r.notices or {}) do
    table.insert(lines, "[note: " .. n .. "]")
  end
  local ch = r.changes
  if type(ch) == "table" and type(ch.summary) == "string" and ch.summary ~= "" then
    table.insert(
      lines,
      ("[%s · :RunBashChanges %s · :RunBashUndo %s]"):format(ch.summary, r.id, r.id)
    )
  end
  table.insert(lines, M.status_line(r))
  return table.concat(lines, "\n")
end

--- The one-line summary that ends an output buffer.
---@param r table a run result or session info
---@return string
function M.status_line(r)
  local parts = {}
  if r.error then
    return "[run_bash: " .. r.error .. "]"
  end
  if r.status == "running" then
    table.insert(parts, "still running in the background (session " .. r.id .. ")")
  elseif r.status == "lost" then
    table.insert(parts, "lost: the run_bash host exited")
  elseif r.timed_out then
    table.insert(parts, "timed out")
  elseif r.killed then
    table.insert(parts, "killed")
  elseif r.signal ~= nil and r.signal ~= vim.NIL then
    table.insert(parts, "signal " .. r.signal)
  else
    table.insert(parts, "exit " .. tostring(r.exit_code))
  end
  table.insert(parts, ("%.2fs"):format(r.duration_s or 0))
  table.insert(parts, r.sandboxed and ("sandbox: " .. r.backend) or "WITHOUT SANDBOX")
  if (r.leftovers or 0) > 0 then
    table.insert(parts, ("%d leftover process(es) stopped"):format(r.leftovers))
  end
  return "[" .. table.concat(parts, " · ") .. "]"
end

--- Run `cmd` and stream it into a scratch buffer. The host holds a command that needs approval
--- and the approval window asks first (`bang`: without the sandbox, always asks).
---@param cmd string
---@param opts { bang?: boolean, cwd?: string, bg_after?: number }
function M.run(cmd, opts)
  opts = opts or {}
  if type(cmd) ~= "string" or vim.trim(cmd) == "" then
    return H.err("usage: :RunBash {command}")
  end
  return M.start_in_buffer(cmd, {
    skip_sandbox = opts.bang or nil,
    ask = opts.bang or nil,
    cwd = opts.cwd,
    bg_after = opts.bg_after,
  })
end

--- Start `spec` (with `cmd`) and show it in a `run_bash://<id>` buffer once it starts: at once,
--- or after the user approved it.
---@param cmd string
---@param spec table run options (see `require('run_bash').run`)
---@return table|nil info
function M.start_in_buffer(cmd, spec)
  spec = vim.tbl_extend("force", spec or {}, { cmd = cmd, live = true })
  spec.cwd = spec.cwd or vim.fn.getcwd()
  local buf
  local info, err = rb().run(spec, function(result)
    if result.status == "rejected" or result.status == "cancelled" then
      return -- the user said no: nothing ran, nothing to show
    end
    if result.status == "running" then
      -- Background: the buffer keeps following; the status line comes when it exits.
      rb().notify(
        ("session %s runs in the background; :RunBashKill %s stops it"):format(result.id, result.id)
      )
      H.announced[result.id] = true
      H.on_exit(result.id, function(r)
        if buf then
          H.append(buf, "\n" .. M.end_lines(r))
        end
        local ok = r.status == "exited" and r.exit_code == 0
        vim.notify(
          require("run_bash.tool_format").exit_line(r),
          ok and vim.log.levels.INFO or vim.log.levels.WARN
        )
      end)
      return
    end
    if buf then
      H.append(buf, "\n" .. M.end_lines(result))
    end
    if result.error then
      H.err(result.error)
    end
  end, function(text)
    if buf then
      H.append(buf, text)
    end
  end)
  if not info then
    return H.err(err)
  end
  local function open()
    buf = H.open_scratch("run_bash://" .. info.id)
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "$ " .. cmd:gsub("\n", " ⏎ "), "" })
    vim.bo[buf].modifiable = false
    vim.b[buf].run_bash_session = info.id
    vim.cmd("wincmd p")
  end
  if info.status == "awaiting_approval" or info.status == "queued" then
    rb().on_started(info.id, open)
  else
    open()
  end
  return info
end

--- :RunBash with a range runs those lines of the current buffer as one script.
---@param o table the command's arguments (`line1`, `line2`)
---@return string
function H.range_text(o)
  local lines = vim.api.nvim_buf_get_lines(0, o.line1 - 1, o.line2, false)
  return table.concat(lines, "\n")
end

---@param arglead string
---@param running_only boolean
---@return string[]
function H.complete_ids(arglead, running_only)
  local ids = {}
  for id, info in pairs(rb().sessions) do
    if (not running_only or info.status == "running") and vim.startswith(id, arglead) then
      table.insert(ids, id)
    end
  end
  table.sort(ids)
  return ids
end

--- The CHANGES column of :RunBashSessions: `A1 M2 D3` (added, modified, deleted files), `none`,
--- `not recorded`, `…` while it runs, `-` when nothing is recorded (undo off, never started).
---@param s table session info
---@return string
function M.changes_cell(s)
  local ch = s.changes
  if type(ch) ~= "table" then
    return s.status == "running" and "…" or "-"
  end
  if ch.not_recorded then
    return "not recorded"
  end
  local c, parts = ch.counts or {}, {}
  local kinds = { { "added", "A" }, { "modified", "M" }, { "deleted", "D" }, { "skipped", "?" } }
  for _, k in ipairs(kinds) do
    if (c[k[1]] or 0) > 0 then
      table.insert(parts, k[2] .. c[k[1]])
    end
  end
  if #parts == 0 then
    return ch.summary ~= "" and "dirs only" or "none"
  end
  return table.concat(parts, " ")
end

--- The PORTS cell of `:RunBashSessions`: each port the session listens on, with the host port
--- it is forwarded to (`5173>40211`: reach it from the host at 127.0.0.1:40211).
---@param s table session info
---@return string
function M.ports_cell(s)
  if type(s.ports) ~= "table" or #s.ports == 0 then
    return "-"
  end
  local host = {}
  for _, f in ipairs(type(s.forwarded) == "table" and s.forwarded or {}) do
    host[f.port] = f.host_port
  end
  local parts = {}
  for _, p in ipairs(s.ports) do
    table.insert(parts, host[p] and (p .. ">" .. host[p]) or tostring(p))
  end
  return table.concat(parts, ",")
end

---@return integer|nil bufnr
function M.sessions_buffer()
  local list, err = rb().sessions_list()
  if not list then
    return H.err(err)
  end
  local row = "%-8s %-10s %-8s %-7s %-10s %-14s %-12s %s"
  local lines =
    { row:format("ID", "STATUS", "PID", "AGE", "BACKEND", "PORTS", "CHANGES", "COMMAND") }
  for _, s in ipairs(list) do
    local status = s.status
    if s.status ~= "running" and s.exit_code ~= nil and s.exit_code ~= vim.NIL then
      status = status .. ":" .. s.exit_code
    end
    local ports = M.ports_cell(s)
    table.insert(
      lines,
      row:format(
        s.id,
        status,
        s.status == "running" and tostring(s.pid) or "-",
        ("%ds"):format(math.floor(s.age_s)),
        s.backend,
        ports,
        M.changes_cell(s),
        (s.cmd:gsub("\n", " ⏎ "))
      )
    )
  end
  if #list == 0 then
    table.insert(lines, "(no sessions)")
  end
  local buf = H.open_scratch("run_bash://sessions", "run_bash_sessions")
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  return buf
end

---@param id string|nil
---@param bang boolean kill every running session
function M.kill(id, bang)
  if bang then
    local info, err = rb().kill(nil, function(reply)
      if reply.error then
        H.err(reply.error)
      else
        rb().notify(("killed %d session(s)"):format(#(reply.result or {})))
      end
    end)
    if not info then
      H.err(err)
    end
    return
  end
  if id == nil or id == "" then
    return H.err("usage: :RunBashKill {session-id}  (or :RunBashKill! to kill all)")
  end
  local info, err = rb().kill(id, function(reply)
    if reply.error then
      return H.err(reply.error)
    end
    local r = reply.result
    if r.already_ended then
      rb().notify(("session %s had already ended: %s"):format(id, M.status_line(r)))
    elseif H.announced[id] then
      H.announced[id] = nil -- its end was announced when it exited
    else
      rb().notify(("session %s: %s"):format(id, M.status_line(r)))
    end
  end)
  if not info then
    H.err(err)
  end
end

---@param id string
---@return integer|nil bufnr
function M.output_buffer(id)
  if id == nil or id == "" then
    return H.err("usage: :RunBashOutput {session-id}")
  end
  local buf
  -- Reopening replaces this buffer's own follower; others (the `:RunBash` buffer) keep theirs.
  if H.followers[id] then
    rb().unwatch(id, H.followers[id])
  end
  local function follow(text)
    if buf then
      H.append(buf, text)
    end
  end
  local info, err = rb().watch(id, follow)
  if not info then
    return H.err(err)
  end
  H.followers[id] = follow
  local existed = vim.fn.bufnr("run_bash://" .. id .. "/output") ~= -1
  buf = H.open_scratch("run_bash://" .. id .. "/output")
  if not existed then
    rb().pin_while(id, buf) -- the history keeps the session while its output is open
  end
  vim.bo[buf].modifiable = true
  local lines =
    vim.split("$ " .. info.cmd:gsub("\n", " ⏎ ") .. "\n" .. info.data, "\n", { plain = true })
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  if info.status == "running" then
    rb().on_result(id, function(r)
      if r.status ~= "running" then
        H.append(buf, "\n" .. M.end_lines(r))
      end
    end)
    H.on_exit(id, function(r)
      H.append(buf, "\n" .. M.end_lines(r))
    end, "RunBashOutput" .. id)
  else
    H.append(buf, "\n" .. M.end_lines(info))
  end
  return buf
end

--- Call `cb(info)` once, when background session `id` exits. A named `group` replaces an earlier
--- callback of the same name.
---@param id string
---@param cb fun(info: table)
---@param group? string
function H.on_exit(id, cb, group)
  vim.api.nvim_create_autocmd("User", {
    pattern = "RunBashExited",
    group = group and vim.api.nvim_create_augroup(group, { clear = true }) or nil,
    callback = function(ev)
      if ev.data and ev.data.id == id then
        cb(ev.data)
        return true
      end
    end,
  })
end

--- Split a leading `-bg` or `-bg=N` off `:RunBash` arguments: returns bg_after (or nil), rest.
---@param args string
---@return integer|nil bg_after, string rest
function M.parse_bg(args)
  local n, rest = args:match("^%-bg=(%d+)%s*(.*)$")
  if n then
    return tonumber(n), rest
  end
  rest = args:match("^%-bg%s+(.*)$") or (args == "-bg" and "" or nil)
  if rest then
    return 1, rest
  end
  return nil, args
end

--- Define the user commands (called from plugin/run_bash.lua).
function M.create()
  local new = vim.api.nvim_create_user_command
  new("RunBash", function(o)
    local bg, cmd = M.parse_bg(o.args)
    if o.range > 0 and cmd == "" then
      cmd = H.range_text(o)
    end
    if cmd == "" then
      vim.ui.input({ prompt = "RunBash: ", completion = "shellcmd" }, function(input)
        if input and input ~= "" then
          M.run(input, { bang = o.bang, bg_after = bg })
        end
      end)
      return
    end
    M.run(cmd, { bang = o.bang, bg_after = bg })
  end, {
    nargs = "*",
    bang = true,
    range = true,
    complete = "shellcmd",
    desc = "Run a bash command in the sandbox (! = without sandbox, always asks)",
  })
  new("RunBashSessions", function()
    M.sessions_buffer()
  end, { desc = "List run_bash sessions" })
  new("RunBashKill", function(o)
    M.kill(o.fargs[1], o.bang)
  end, {
    nargs = "?",
    bang = true,
    complete = function(arglead)
      return H.complete_ids(arglead, true)
    end,
    desc = "Kill a run_bash session (! = all sessions)",
  })
  new("RunBashOutput", function(o)
    M.output_buffer(o.fargs[1])
  end, {
    nargs = 1,
    complete = function(arglead)
      return H.complete_ids(arglead, false)
    end,
    desc = "Show (and follow) a run_bash session's output",
  })
  new("RunBashLog", function()
    require("run_bash.audit_log").open()
  end, { desc = "Open the run_bash audit log" })
  new("RunBashChanges", function(o)
    require("run_bash.undo").show_changes(o.fargs[1])
  end, {
    nargs = "?",
    complete = function(arglead)
      return require("run_bash.undo").complete(arglead)
    end,
    desc = "Show what a run changed, as a diff (default: the latest run with changes)",
  })
  new("RunBashUndo", function(o)
    require("run_bash.undo").undo(o.fargs[1], o.bang)
  end, {
    nargs = "?",
    bang = true,
    complete = function(arglead)
      return require("run_bash.undo").complete(arglead)
    end,
    desc = "Undo what a run changed (! = also paths changed since; default: the latest run)",
  })
end

return M
