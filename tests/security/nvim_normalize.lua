-- vim.fs.normalize and vim.fs.joinpath on hex-encoded inputs: the consumer side of the test of
-- run_bash's port (agentrules.nvim_normalize / nvim_joinpath).
-- Usage: nvim --headless --clean -l nvim_normalize.lua IN_JSON OUT_JSON
local function unhex(h)
  return (h:gsub("..", function(b)
    return string.char(tonumber(b, 16))
  end))
end
local function hex(s)
  return (s:gsub(".", function(c)
    return string.format("%02x", c:byte())
  end))
end
local f = assert(io.open(arg[1], "rb"))
local cases = vim.json.decode(f:read("*a"))
f:close()
local out = {}
for i, c in ipairs(cases) do
  local a, b = unhex(c[1]), unhex(c[2])
  out[i] = { hex(vim.fs.normalize(a)), hex(vim.fs.joinpath(b, a)) }
end
local o = assert(io.open(arg[2], "wb"))
o:write(vim.json.encode(out))
o:close()
