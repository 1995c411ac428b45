-- run_bash: define the user commands. Cheap: no Python starts until a command is used.

-- First of all: no Lua module is loaded from the working directory (the project runs write).
require("run_bash.lua_path").drop_relative()

if vim.g.loaded_run_bash then
  return
end
vim.g.loaded_run_bash = true

if vim.fn.has("nvim-0.11") == 0 then
  vim.notify("run_bash: requires Neovim 0.11+", vim.log.levels.ERROR)
  return
end

require("run_bash.commands").create()

vim.api.nvim_create_autocmd("VimLeavePre", {
  group = vim.api.nvim_create_augroup("RunBash", { clear = true }),
  desc = "run_bash: kill every session and stop the host",
  callback = function()
    require("run_bash").stop()
  end,
})
