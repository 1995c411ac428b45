--- Lua modules are looked up on absolute paths only.
---
--- LuaJIT's default `package.path` starts with `./?.lua` and its `package.cpath` with `./?.so`:
--- a `require` of a module that is on no runtimepath (`pcall(require, "cmp")` when nvim-cmp is not
--- installed, as CodeCompanion asks) loads `cmp.lua` or `cmp.so` from Neovim's working directory,
--- the project, which every sandboxed run may write. So those relative entries are dropped, in
--- this Neovim, as soon as run_bash is loaded; modules on the runtimepath and on absolute entries
--- (LuaRocks trees) load as before.
local M = {}

--- `paths` without the entries that are not absolute (resolved against the working directory).
---@param paths string a `;`-separated list of templates
---@return string
function M.absolute_only(paths)
  local kept = {}
  for entry in vim.gsplit(paths, ";", { plain = true }) do
    if entry:sub(1, 1) == "/" then
      kept[#kept + 1] = entry
    end
  end
  return table.concat(kept, ";")
end

--- Drop the relative entries of `package.path` and `package.cpath`.
function M.drop_relative()
  package.path = M.absolute_only(package.path)
  package.cpath = M.absolute_only(package.cpath)
end

return M
