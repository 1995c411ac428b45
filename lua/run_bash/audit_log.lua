--- The audit log from Lua: record approval decisions (Python records runs) and open the file.
local M = {}

--- Where the audit log lives.
function M.path()
  return vim.fn.stdpath("state") .. "/run_bash/audit.jsonl"
end

--- Record who decided about `cmd`: "auto", "user_accept", "user_always", "user_always_cached",
--- "user_reject", "user_cancel".
function M.decision(cmd, verdict, decided_by, user_reason, source)
  local rb = require("run_bash")
  if not rb.is_running() then
    return
  end
  verdict = verdict or {}
  rb.request("audit", {
    cmd = cmd,
    cwd = vim.fn.getcwd(),
    backend = verdict.backend,
    sandboxed = verdict.sandboxed,
    pause = verdict.pause,
    rule = verdict.rule,
    reason = verdict.reason,
    decided_by = decided_by,
    user_reason = user_reason,
    source = source or "user",
    session_id = verdict.session_id,
  })
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
