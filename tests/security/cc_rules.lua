-- What CodeCompanion reads for a rules file, by its own code: the differential test's consumer.
-- Usage: nvim --headless --clean -l cc_rules.lua ROOT CASES_JSON OUT_JSON
-- Each case { rules = path, cwd = dir, parser = name } gets { reads = { realpath... },
-- tokens = { hex... } }: the files Rules.add_to_chat_from_config adds to a chat (the rules file
-- itself left out), and the references the parser returns (hex, as they may not be UTF-8).
local root, cases_file, out_file = arg[1], arg[2], arg[3]
vim.opt.rtp:prepend(root .. "/deps/plenary.nvim")
vim.opt.rtp:prepend(root .. "/deps/codecompanion.nvim")
require("codecompanion.config").setup({})
local Rules = require("codecompanion.interactions.shared.rules")

local function hex(s)
  return (s:gsub(".", function(c)
    return string.format("%02x", c:byte())
  end))
end

local f = assert(io.open(cases_file, "rb"))
local cases = vim.json.decode(f:read("*a"))
f:close()
local results = {}
for i, c in ipairs(cases) do
  vim.fn.chdir(c.cwd)
  local reads = {}
  local chat = {
    messages = {},
    add_message = function() end,
    add_context = function(_, _, _, id, opts)
      if not vim.startswith(id, "<rules>" .. vim.fn.fnamemodify(c.rules, ":p:.")) then
        local p = opts and opts.path or "?"
        table.insert(reads, vim.uv.fs_realpath(p) or p)
      end
    end,
  }
  local ok, err = pcall(Rules.add_to_chat_from_config, chat, {
    name = "differential",
    parser = c.parser,
    files = { c.rules },
  })
  local tokens = {}
  local content = assert(io.open(c.rules, "rb")):read("*a")
  local pok, parser = pcall(require, "codecompanion.interactions.shared.rules.parsers." .. c.parser)
  if pok then
    local parsed = parser({ content = content, path = c.rules })
    for _, t in ipairs(parsed.meta and parsed.meta.included_files or {}) do
      table.insert(tokens, hex(t))
    end
  end
  results[i] = { ok = ok, err = err and tostring(err) or vim.NIL, reads = reads, tokens = tokens }
end
local out = assert(io.open(out_file, "wb"))
out:write(vim.json.encode(results))
out:close()
