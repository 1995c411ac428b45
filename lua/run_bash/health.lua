--- :checkhealth run_bash — layer by layer, stopping at the first broken layer.
local M = {}

function M.check()
  local health = vim.health
  health.start("run_bash: Neovim")
  if vim.fn.has("nvim-0.11") == 0 then
    health.error("Neovim 0.11+ is required", "upgrade Neovim")
    return
  end
  local v = vim.version()
  health.ok(("Neovim %d.%d.%d"):format(v.major, v.minor, v.patch))

  local rb = require("run_bash")
  health.start("run_bash: Python")
  local python = rb.python()
  if vim.fn.executable(python) ~= 1 then
    health.error("Python not found: " .. python, {
      "run `make deps` in " .. rb.root(),
      "or set g:run_bash_python to a Python 3.10+ with msgpack",
    })
    return
  end
  local venv = rb.root() .. "/.venv/bin/python"
  if python == venv then
    health.ok("Python: " .. python .. " (the plugin's venv)")
  else
    health.info("Python: " .. python)
    if vim.fn.executable(venv) ~= 1 then
      health.warn("the plugin's venv is missing", { "run `make deps` in " .. rb.root() })
    end
  end

  local report, err = rb.request("health")
  if not report then
    health.error("the Python host does not start: " .. tostring(err), {
      "run `make deps` in " .. rb.root(),
      "see " .. rb.log_path(),
    })
    return
  end
  health.ok("host started (job " .. tostring(rb._job()) .. ")")
  for _, item in ipairs(report) do
    if item.level == "start" then
      health.start("run_bash: " .. item.msg)
    else
      local advice = item.advice ~= "" and item.advice or nil
      health[item.level](item.msg, advice)
    end
  end

  health.start("run_bash: undo store")
  local usage, uerr = rb.undo_usage()
  if not usage then
    health.warn("the undo store cannot be read: " .. tostring(uerr), {
      "see " .. rb.log_path(),
    })
  else
    local size = usage.bytes < 1048576 and ("%d KiB"):format(math.ceil(usage.bytes / 1024))
      or ("%.1f MiB"):format(usage.bytes / 1048576)
    local what = ("%s: %s, %d change set(s) in %d project(s); kept: the last %d runs with"):format(
      usage.path,
      size,
      usage.runs,
      usage.projects,
      usage.keep
    ) .. (" changes per project within %.0f MiB, a project unused for %d days is dropped"):format(
      usage.max_store / 1048576,
      usage.idle_days
    )
    if usage.enabled then
      health.ok(what)
    else
      health.info("undo is off (undo.enabled = false); " .. what)
    end
  end

  health.start("run_bash: CodeCompanion (optional)")
  local ok = pcall(require, "codecompanion")
  if ok then
    health.ok("CodeCompanion found; the run_bash tool registers through extensions.run_bash")
  else
    health.info("CodeCompanion not found: the :RunBash commands work without it")
  end
  health.info("log file: " .. rb.log_path())
  health.info("audit log: " .. require("run_bash.audit_log").path())
end

return M
