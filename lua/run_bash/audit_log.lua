--- The audit log's place and :RunBashLog. Python writes every line (decisions and runs).
local M = {}

--- Where the audit log lives (the host is told with `RUN_BASH_AUDIT`).
---@return string
function M.path()
  return vim.fn.stdpath("state") .. "/run_bash/audit.jsonl"
end

--- :RunBashLog
function M.open()
  local path = M.path()
  if vim.fn.filereadable(path) == 0 then
    require("run_bash").notify("the audit log is empty (" .. path .. ")")
    return
  end
  vim.cmd("botright split " .. vim.fn.fnameescape(path))
  vim.bo.readonly = true
  vim.bo.modifiable = false
  vim.cmd("normal! G")
end

return M
