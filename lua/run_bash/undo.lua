--- :RunBashChanges and :RunBashUndo: a run's change set as a diff, and undo after a confirmation
--- in the approval window's float. The host owns the store and does the work on its worker
--- threads; everything here asks with a callback and renders the answer.
local M = {}
local H = {}

H.MAX_LISTED = 100 -- paths listed per section of the undo window
H.MAX_MESSAGE = 10 -- paths not recovered named in the message after an undo

local function rb()
  return require("run_bash")
end

--- Where the change store lives (the host is told with `RUN_BASH_UNDO`).
---@return string
function M.path()
  return vim.fn.stdpath("state") .. "/run_bash/undo"
end

---@param msg string
---@param level? integer
function H.say(msg, level)
  rb().notify(msg, level)
end

--- :RunBashChanges [id]: the run's change set as a unified diff in a scratch buffer.
---@param id string|nil nil: the latest run with changes
function M.show_changes(id)
  rb().diff(id, function(d, err)
    if not d then
      return H.say(err or "no answer", vim.log.levels.ERROR)
    end
    local lines = vim.split(d.text, "\n", { plain = true })
    if lines[#lines] == "" then
      table.remove(lines)
    end
    local buf = require("run_bash.commands").open_scratch("run_bash://" .. d.run .. "/changes")
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
    vim.bo[buf].filetype = "diff"
    vim.b[buf].run_bash_run = d.run
    vim.keymap.set("n", "u", function()
      M.undo(d.run, false)
    end, { buffer = buf, nowait = true, desc = "Undo this run (:RunBashUndo)" })
  end)
end

--- The lines of a section of the undo window: a heading and its paths (capped).
---@param lines string[]
---@param marks [integer, string][]
---@param title string
---@param items table[] paths, or `{path, why}`
---@param hl? string
function H.section(lines, marks, title, items, hl)
  if #items == 0 then
    return
  end
  table.insert(lines, ("%s (%d):"):format(title, #items))
  if hl then
    table.insert(marks, { #lines - 1, hl })
  end
  for i, item in ipairs(items) do
    if i > H.MAX_LISTED then
      table.insert(lines, ("  … and %d more"):format(#items - H.MAX_LISTED))
      break
    end
    if type(item) == "table" then
      table.insert(lines, ("  %s — %s"):format(item.path, item.why))
    else
      table.insert(lines, "  " .. item)
    end
  end
end

--- The undo window's text for `plan`.
---@param plan table the host's plan
---@return string[] lines, [integer, string][] marks
function M.plan_lines(plan)
  local lines, marks = {}, {}
  local where = vim.fn.fnamemodify(plan.project, ":~")
  table.insert(lines, ("Undo run %s in %s"):format(plan.run, where))
  if type(plan.label) == "string" and plan.label ~= "" then
    table.insert(lines, "  $ " .. (plan.label:gsub("\n", " ⏎ ")))
    table.insert(marks, { #lines - 1, "Comment" })
  end
  table.insert(lines, "")
  H.section(lines, marks, "Restore", plan.restore, "DiagnosticOk")
  H.section(lines, marks, "Delete (the run added them)", plan.remove, "DiagnosticWarn")
  if plan.force then
    local title = "Changed since the run, put back anyway (!)"
    H.section(lines, marks, title, plan.conflicts, "DiagnosticError")
  else
    local title = "Changed since the run, left alone (:RunBashUndo! forces)"
    H.section(lines, marks, title, plan.conflicts, "DiagnosticWarn")
  end
  H.section(lines, marks, "Not recovered", plan.not_recovered, "Comment")
  return lines, marks
end

--- What an undo did, in one message.
---@param done table the host's answer
---@return string
function M.done_text(done)
  local parts = {
    ("undid run %s: restored %d, removed %d"):format(done.undo_of, #done.restored, #done.removed),
  }
  local conflicts = #done.conflicts
  if conflicts > 0 then
    if done.force then
      table.insert(parts, ("%d changed since the run, put back anyway"):format(conflicts))
    else
      table.insert(
        parts,
        ("%d changed since the run, left alone (:RunBashUndo! %s forces)"):format(
          conflicts,
          done.undo_of
        )
      )
    end
  end
  for _, e in ipairs(done.errors or {}) do
    table.insert(parts, ("failed: %s (%s)"):format(e.path, e.why))
  end
  local lost = done.not_recovered or {}
  if #lost > 0 then
    local items = {}
    for i, e in ipairs(lost) do
      if i > H.MAX_MESSAGE then
        table.insert(
          items,
          ("and %d more (:RunBashChanges %s)"):format(#lost - i + 1, done.undo_of)
        )
        break
      end
      table.insert(items, ("%s (%s)"):format(e.path, e.why))
    end
    table.insert(parts, "not recovered: " .. table.concat(items, ", "))
  end
  if type(done.run) == "string" then
    local again = ("this undo is run %s (:RunBashUndo %s takes it back)"):format(done.run, done.run)
    table.insert(parts, again)
  end
  return table.concat(parts, "; ")
end

--- :RunBashUndo[!] [id]: show what undoing the run will restore and delete (and the conflicts) in
--- the approval window's float; on `a`, undo it and reload the buffers of restored files.
---@param id string|nil nil: the latest run with changes
---@param force boolean put back paths that changed since the run too
function M.undo(id, force)
  rb().undo_plan(id, { force = force }, function(plan, err)
    if not plan then
      return H.say(err or "no answer", vim.log.levels.ERROR)
    end
    if #plan.restore == 0 and #plan.remove == 0 then
      local why = #plan.conflicts > 0
          and ("every path changed again since (:RunBashUndo! %s forces)"):format(plan.run)
        or "the project is already as it was before the run"
      return H.say(("nothing to undo for run %s: %s"):format(plan.run, why), vim.log.levels.WARN)
    end
    local lines, marks = M.plan_lines(plan)
    require("run_bash.approval").ask({
      title = " run_bash: undo ",
      lines = lines,
      marks = marks,
      footer = " [a] undo  [q] cancel ",
      filetype = "run_bash_undo",
      keys = {
        { "a", "accept", "Undo the run" },
        { "q", "cancel", "Cancel" },
        { "<Esc>", "cancel", "Cancel" },
      },
      cancel = "cancel",
      fallback = {
        message = table.concat(lines, "\n"),
        choices = "&Undo\n&Cancel",
        answers = { "accept", "cancel" },
      },
    }, function(choice)
      if choice ~= "accept" then
        return
      end
      local touched = H.buffers(plan.project, { plan.restore, plan.remove })
      rb().undo(plan.run, { force = force }, function(done, uerr)
        if not done then
          return H.say(uerr or "no answer", vim.log.levels.ERROR)
        end
        local unsaved = H.after_undo(touched)
        local failed = #(done.errors or {}) > 0 or #(done.not_recovered or {}) > 0
        local text = M.done_text(done)
        if #unsaved > 0 then
          text = text
            .. ("; %d buffer(s) with unsaved changes were not reloaded and :w will not write them over the undo (:w! does): %s"):format(
              #unsaved,
              table.concat(unsaved, ", ")
            )
          failed = true
        end
        H.say(text, failed and vim.log.levels.WARN or vim.log.levels.INFO)
        vim.api.nvim_exec_autocmds(
          "User",
          { pattern = "RunBashUndo", data = done, modeline = false }
        )
      end)
    end)
  end)
end

--- Loaded buffers of files an undo will restore or remove: `{ {buf, name} }`.
---@param project string the project's path (as the host shows it)
---@param lists string[][] project-relative paths
function H.buffers(project, lists)
  local root = vim.fn.fnamemodify(vim.fn.expand(project), ":p"):gsub("/$", "")
  local wanted = {}
  for _, list in ipairs(lists) do
    for _, p in ipairs(list or {}) do
      if type(p) == "string" and p:sub(1, 1) ~= '"' then -- quoted: an odd name, never a buffer's
        wanted[root .. "/" .. p:gsub("/$", "")] = true
      end
    end
  end
  local out = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_is_loaded(buf) and vim.api.nvim_buf_get_name(buf) or ""
    if name ~= "" and vim.bo[buf].buftype == "" and wanted[name] then
      table.insert(out, { buf = buf, name = name })
    end
  end
  return out
end

--- After an undo: buffers without unsaved changes are read again from disk; one with unsaved
--- changes keeps them, and a plain `:w` of it is refused (it would write the run's content back
--- over what undo restored) until `:w!` says so. Returns the names of those buffers.
---@param touched { buf: integer, name: string }[]
---@return string[]
function H.after_undo(touched)
  local unsaved = {}
  for _, t in ipairs(touched) do
    if vim.api.nvim_buf_is_valid(t.buf) then
      if vim.bo[t.buf].modified then
        table.insert(unsaved, vim.fn.fnamemodify(t.name, ":~:."))
        H.guard(t.buf)
      elseif vim.uv.fs_stat(t.name) then
        vim.api.nvim_buf_call(t.buf, function()
          pcall(vim.cmd, "silent! edit")
        end)
      end
    end
  end
  pcall(vim.cmd.checktime)
  return unsaved
end

--- Refuse a plain `:w` of `buf` (its file was restored by undo under its unsaved changes).
---@param buf integer
function H.guard(buf)
  vim.b[buf].run_bash_undone = true
  local group = vim.api.nvim_create_augroup("RunBashUndone" .. buf, { clear = true })
  vim.api.nvim_create_autocmd("BufWritePre", {
    group = group,
    buffer = buf,
    desc = "run_bash: :RunBashUndo restored this file under unsaved changes",
    callback = function()
      if vim.v.cmdbang == 1 then
        vim.b[buf].run_bash_undone = nil
        pcall(vim.api.nvim_del_augroup_by_id, group)
        return
      end
      error(
        "run_bash: :RunBashUndo restored this file while this buffer had unsaved changes; "
          .. ":w would write them over the undo. :e! reloads the file, :w! writes the buffer anyway",
        0
      )
    end,
  })
end

--- Completion: ids of runs whose change sets are kept, newest first.
---@param arglead string
---@return string[]
function M.complete(arglead)
  local ids = {}
  for _, id in ipairs(rb().change_runs) do
    if vim.startswith(id, arglead) then
      table.insert(ids, id)
    end
  end
  return ids
end

return M
