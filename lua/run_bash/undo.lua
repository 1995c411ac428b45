--- :RunBashChanges and :RunBashUndo: a run's change set as a diff, and undo after a confirmation
--- in the approval window's float. The host owns the store and does the work on its worker
--- threads; everything here asks with a callback and renders the answer.
local M = {}
local H = {}

H.MAX_LISTED = 100 -- paths listed per section of the undo window

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
      rb().undo(plan.run, { force = force }, function(done, uerr)
        if not done then
          return H.say(uerr or "no answer", vim.log.levels.ERROR)
        end
        pcall(vim.cmd.checktime)
        local failed = #(done.errors or {}) > 0
        H.say(M.done_text(done), failed and vim.log.levels.WARN or vim.log.levels.INFO)
        vim.api.nvim_exec_autocmds(
          "User",
          { pattern = "RunBashUndo", data = done, modeline = false }
        )
      end)
    end)
  end)
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
