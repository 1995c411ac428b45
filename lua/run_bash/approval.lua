--- The approval window for :RunBash and held runs, and the same float for other confirmations
--- (:RunBashUndo): one floating window at a time, requests queued.
---
--- Approval keys: `a` accept once, `A` accept this exact command for the rest of this Neovim
--- session, `r` reject (asks for an optional reason), `q` / `<Esc>` cancel. Closing the window any
--- other way, or wiping its buffer, cancels. Only when a float cannot be opened at all does it fall
--- back to `vim.fn.confirm` — never to "accept". The window only shows and asks: the host decided
--- that it must ask, remembers `A`, and writes the audit log.
local M = {}
local H = {}

---@class run_bash.ApprovalRequest
---@field cmd string
---@field answer table the gate's answer (`needs_approval`, `reason`, `rule`, `sandboxed`, …)
---@field cwd? string

---@class run_bash.FloatKey
---@field [1] string the key
---@field [2] string the choice it answers
---@field [3] string its description
---@field reason? string a prompt for an optional reason, asked before answering

---@class run_bash.FloatSpec
---@field title string
---@field lines string[]
---@field marks? [integer, string][] (0-based line, highlight group) for whole lines
---@field keys run_bash.FloatKey[]
---@field cancel string the choice when the window is closed any other way
---@field footer? string shown under the window
---@field filetype? string
---@field decorate? fun(buf: integer) more highlighting (errors are ignored)
---@field show_end? boolean when it does not fit, show the end (else the start)
---@field focus? integer the line the cursor starts on when it fits
---@field fallback { message: string, choices: string, answers: string[] } for `vim.fn.confirm`

H.queue = {}
H.active = nil
H.ns = vim.api.nvim_create_namespace("run_bash_approval")

--- Ask the user about `req`; `cb(decision, reason)` exactly once with decision "accept" |
--- "always" | "reject" | "cancel".
---@param req run_bash.ApprovalRequest
---@param cb fun(decision: "accept"|"always"|"reject"|"cancel", reason?: string)
function M.request(req, cb)
  M.ask(H.approval_spec(req), cb)
end

--- Show `spec` in the float (after the requests already waiting); `cb(choice, reason)` exactly
--- once, with the choice of the key pressed, or `spec.cancel`.
---@param spec run_bash.FloatSpec
---@param cb fun(choice: string, reason?: string)
function M.ask(spec, cb)
  table.insert(H.queue, { spec = spec, cb = cb })
  if not H.active then
    H.next()
  end
end

--- Number of requests waiting (including the one shown).
function M.pending()
  return #H.queue + (H.active and 1 or 0)
end

function H.next()
  local item = table.remove(H.queue, 1)
  if not item then
    return
  end
  H.active = item
  local ok, err = pcall(H.open, item)
  if not ok then
    H.fallback(item, err)
  end
end

function H.finish(decision, reason)
  local item = H.active
  if not item then
    return
  end
  H.active = nil
  H.close(item)
  local ok, e = pcall(item.cb, decision, reason)
  if not ok then
    require("run_bash").notify("approval callback failed: " .. tostring(e), vim.log.levels.ERROR)
  end
  vim.schedule(H.next)
end

function H.close(item)
  if item.augroup then
    pcall(vim.api.nvim_del_augroup_by_id, item.augroup)
  end
  if item.win and vim.api.nvim_win_is_valid(item.win) then
    pcall(vim.api.nvim_win_close, item.win, true)
  end
  if item.buf and vim.api.nvim_buf_is_valid(item.buf) then
    pcall(vim.api.nvim_buf_delete, item.buf, { force = true })
  end
end

--- The float that asks about a command.
---@param req run_bash.ApprovalRequest
---@return run_bash.FloatSpec
function H.approval_spec(req)
  local lines, marks, cmd_lines = H.lines(req)
  local v = req.answer
  return {
    title = " run_bash ",
    lines = lines,
    marks = marks,
    filetype = "run_bash_approval",
    decorate = function(buf)
      if not pcall(H.highlight_command, buf, req.cmd) then
        pcall(H.highlight_command_syntax, buf, cmd_lines)
      end
    end,
    show_end = true,
    focus = cmd_lines,
    keys = {
      { "a", "accept", "Accept once" },
      { "A", "always", "Accept this command for the session" },
      { "r", "reject", "Reject", reason = "Reason for rejecting (optional): " },
      { "q", "cancel", "Cancel" },
      { "<Esc>", "cancel", "Cancel" },
    },
    cancel = "cancel",
    fallback = {
      message = ("%s\n%s\n%s"):format(
        req.cmd,
        v.sandboxed and ("sandbox: " .. v.backend) or "WITHOUT SANDBOX",
        v.reason or ""
      ),
      choices = "&Accept once\n&Reject\n&Cancel",
      answers = { "accept", "reject", "cancel" },
    },
  }
end

function H.lines(req)
  local v = req.answer
  local lines, marks = {}, {}
  local function add(text, hl)
    table.insert(lines, text)
    if hl then
      table.insert(marks, { #lines - 1, hl })
    end
  end
  for _, l in ipairs(vim.split(req.cmd, "\n", { plain = true })) do
    add("  " .. l)
  end
  local cmd_lines = #lines
  add("")
  if v.sandboxed then
    add("where:  sandbox: " .. v.backend, "DiagnosticOk")
  else
    add(
      "where:  WITHOUT SANDBOX"
        .. (v.unavailable ~= "" and v.unavailable and (" (" .. v.unavailable .. ")") or ""),
      "DiagnosticError"
    )
  end
  local hits = require("run_bash.tool_format").reasons(v)
  if #hits > 1 then
    add(("why:    %d reasons to pause:"):format(#hits), "DiagnosticWarn")
    for _, h in ipairs(hits) do
      add(("        [%s] %s"):format(h.effect, h.reason), "DiagnosticWarn")
    end
  else
    local class = hits[1] and (" [" .. hits[1].effect .. "]") or ""
    add("why:    " .. tostring(v.reason or "it needs your approval") .. class, "DiagnosticWarn")
  end
  if v.rule and v.rule ~= vim.NIL then
    add("rule:   " .. v.rule)
  end
  if type(v.undo_why) == "string" and v.undo_why ~= "" then
    add("undo:   " .. v.undo_why)
  end
  add("cwd:    " .. (req.cwd or vim.fn.getcwd()))
  add("")
  add("[a] accept once  [A] always (this session)  [r] reject  [q] cancel", "Comment")
  return lines, marks, cmd_lines
end

--- Bash highlighting for the command lines (indented by two columns) when a bash parser is
--- installed; without one the command stays plain.
function H.highlight_command(buf, cmd)
  local parser = vim.treesitter.get_string_parser(cmd, "bash")
  local query = vim.treesitter.query.get("bash", "highlights")
  if not query then
    error("no bash highlights query")
  end
  local tree = parser:parse()[1]
  for id, node in query:iter_captures(tree:root(), cmd) do
    local sr, sc, er, ec = node:range()
    vim.api.nvim_buf_set_extmark(buf, H.ns, sr, sc + 2, {
      end_row = er,
      end_col = ec + 2,
      hl_group = "@" .. query.captures[id] .. ".bash",
      priority = 110,
      strict = false,
    })
  end
end

--- Size the window to its wrapped text. When a long command does not fit, the window shows the
--- end of the command and everything below it (where, why, rule, cwd, keys): those must never be
--- off-screen; the start of the command is reached by scrolling up. A float without `show_end`
--- shows its start.
function H.fit(win, lines, spec)
  local max_h = math.max(5, vim.o.lines - 6)
  local ok, h = pcall(vim.api.nvim_win_text_height, win, {})
  local need = ok and h.all or #lines
  local height = math.min(need, max_h)
  local cfg = vim.api.nvim_win_get_config(win)
  cfg.height = height
  cfg.row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1)
  vim.api.nvim_win_set_config(win, cfg)
  if need > height and spec.show_end then
    -- The info lines must be visible: the cursor goes to the last line, at the bottom.
    vim.api.nvim_win_call(win, function()
      vim.api.nvim_win_set_cursor(win, { #lines, 0 })
      vim.cmd("normal! zb")
    end)
  else
    pcall(vim.api.nvim_win_set_cursor, win, { math.max(1, spec.focus or 1), 0 })
  end
end

--- Without a bash parser: Vim's own sh syntax (bash flavour) over the command lines.
function H.highlight_command_syntax(buf, cmd_lines)
  vim.api.nvim_buf_call(buf, function()
    vim.b.is_bash = 1
    vim.cmd("syntax include @RunBashSh syntax/sh.vim")
    vim.cmd(
      ("syntax region RunBashCommand start=/\\%%1l/ end=/\\%%%dl.*$/ keepend contains=@RunBashSh"):format(
        cmd_lines
      )
    )
  end)
end

function H.open(item)
  local spec = item.spec
  local lines = spec.lines
  local buf = vim.api.nvim_create_buf(false, true)
  item.buf = buf
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  for _, m in ipairs(spec.marks or {}) do
    vim.api.nvim_buf_set_extmark(buf, H.ns, m[1], 0, { line_hl_group = m[2] })
  end
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].modifiable = false
  vim.bo[buf].filetype = spec.filetype or "run_bash_float"
  if spec.decorate then
    pcall(spec.decorate, buf)
  end
  local width = 20
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  width = math.min(width + 2, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines + 2, math.max(5, vim.o.lines - 6))
  item.win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    width = width,
    height = math.min(#lines, height),
    row = math.max(0, math.floor((vim.o.lines - height) / 2) - 1),
    col = math.max(0, math.floor((vim.o.columns - width) / 2)),
    style = "minimal",
    border = "rounded",
    title = spec.title,
    title_pos = "center",
    footer = spec.footer,
    footer_pos = spec.footer and "center" or nil,
    noautocmd = false,
  })
  vim.wo[item.win].wrap = true
  vim.wo[item.win].linebreak = true
  vim.wo[item.win].cursorline = false
  H.fit(item.win, lines, spec)
  for _, key in ipairs(spec.keys) do
    local lhs, choice, desc = key[1], key[2], key[3]
    vim.keymap.set("n", lhs, function()
      if not key.reason then
        return H.finish(choice)
      end
      local current = H.active
      vim.ui.input({ prompt = key.reason }, function(reason)
        if H.active == current then
          H.finish(choice, reason)
        end
      end)
    end, { buffer = buf, nowait = true, desc = desc })
  end
  item.augroup = vim.api.nvim_create_augroup("RunBashApproval", { clear = true })
  -- Closing the window or losing its buffer any other way cancels (deferred: we may be inside
  -- the close itself).
  local function cancel_if_open()
    if H.active == item then
      vim.schedule(function()
        if H.active == item then
          H.finish(spec.cancel)
        end
      end)
    end
  end
  vim.api.nvim_create_autocmd({ "BufWipeout", "BufHidden" }, {
    group = item.augroup,
    buffer = buf,
    desc = "run_bash: closing the approval window cancels",
    callback = cancel_if_open,
  })
  vim.api.nvim_create_autocmd("WinClosed", {
    group = item.augroup,
    pattern = tostring(item.win),
    desc = "run_bash: closing the approval window cancels",
    callback = cancel_if_open,
  })
end

function H.fallback(item, err)
  H.close(item)
  local fb = item.spec.fallback
  local msg = ("run_bash (%s): %s"):format(tostring(err), fb.message)
  local n = vim.fn.confirm(msg, fb.choices, #fb.answers)
  item.win, item.buf = nil, nil
  -- 0 (the dialog was dismissed) is the cancel choice, never the first answer.
  H.finish(fb.answers[n] or item.spec.cancel)
end

--- For tests: the window of the request being shown, or nil.
function M._active_win()
  return H.active and H.active.win
end

return M
