-- Minimal config for `make run`: run_bash from this checkout, nothing else.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h")
vim.opt.runtimepath:prepend(root)
vim.cmd("runtime plugin/run_bash.lua")
require("run_bash").setup({})
