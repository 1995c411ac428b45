--- What CodeCompanion reads from a project by itself, as plain data for the host, which checks it
--- after every run: its rules files (`rules.<group>.files`, nested groups too; loaded into the
--- next chat) and its per-project config files (`opts.per_project_config.files`, run with dofile()).
local M = {}

local function add_files(out, files, parser, depth)
  if type(files) ~= "table" or depth > 8 then
    return
  end
  for _, f in pairs(files) do
    if type(f) == "string" then
      table.insert(out, { path = f, parser = parser })
    elseif type(f) == "table" then
      local p = type(f.parser) == "string" and f.parser or parser
      if type(f.path) == "string" then
        table.insert(out, { path = f.path, parser = p })
      else
        add_files(out, f.files, p, depth + 1) -- a nested group
      end
    end
  end
end

--- `{ rules = { { path =, parser = }, ... }, project_config = { name, ... } }`, or nil when
--- CodeCompanion is not loaded.
function M.collect()
  local cc = package.loaded["codecompanion.config"]
  if type(cc) ~= "table" then
    return nil
  end
  local ok, rules_cfg, opts = pcall(function()
    return cc.rules, cc.opts
  end)
  if not ok then
    return nil
  end
  local rules, project = {}, {}
  if type(rules_cfg) == "table" then
    for name, group in pairs(rules_cfg) do
      if name ~= "opts" and name ~= "parsers" and type(group) == "table" then
        add_files(rules, group.files, type(group.parser) == "string" and group.parser or nil, 0)
      end
    end
  end
  local ppc = type(opts) == "table" and opts.per_project_config or nil
  if type(ppc) == "table" and type(ppc.files) == "table" then
    for _, f in ipairs(ppc.files) do
      if type(f) == "string" then
        table.insert(project, f)
      end
    end
  end
  return { rules = rules, project_config = project }
end

return M
