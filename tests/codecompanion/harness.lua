-- Drives a real CodeCompanion Chat with a fake LLM adapter and CodeCompanion's own HTTP mock
-- (deps/codecompanion.nvim/tests/mocks/http.lua). Loaded with dofile() by test_chat.py; `root` is
-- this checkout.
local root = ...
local M = {}

local ADAPTER = "run_bash_test_adapter"

vim.opt.runtimepath:prepend(root .. "/deps/plenary.nvim")
vim.opt.runtimepath:prepend(root .. "/deps/codecompanion.nvim")
package.path = table.concat({
  root .. "/deps/codecompanion.nvim/?.lua",
  root .. "/deps/codecompanion.nvim/?/init.lua",
  package.path,
}, ";")
vim.cmd("runtime plugin/plenary.vim")
vim.cmd("runtime plugin/codecompanion.lua")

--- A plain-table HTTP adapter: each queued response is the `data` parse_chat gets.
function M.adapter()
  return {
    name = ADAPTER,
    formatted_name = "run_bash test adapter",
    type = "http",
    url = "http://localhost.invalid/v1",
    roles = { llm = "assistant", user = "user" },
    features = { tools = true },
    opts = { stream = false, tools = true },
    schema = { model = { default = "test-model" } },
    handlers = {
      response = {
        parse_chat = function(_, data, tools)
          for _, t in ipairs(data.tools or {}) do
            table.insert(tools, t)
          end
          return {
            status = "success",
            output = { role = "assistant", content = data.content or "" },
          }
        end,
      },
      tools = {
        format_calls = function(_, tools)
          return tools
        end,
        format_response = function(_, call, output)
          return {
            role = "tool",
            tools = { call_id = call.id },
            content = output,
            opts = { visible = false },
          }
        end,
      },
    },
  }
end

--- Set CodeCompanion up with `extensions.run_bash = { opts = ext_opts }` exactly as a user would.
---@param ext_opts table|nil
---@param ext_extra table|nil extra keys of the extension entry (e.g. { enabled = false })
---@param tools_opts table|nil extra `interactions.chat.tools.opts` (e.g. { default_tools = {...} })
---@param cc_extra table|nil more CodeCompanion config (e.g. { rules = {...} })
function M.setup(ext_opts, ext_extra, tools_opts, cc_extra)
  local ext = vim.tbl_extend("force", { opts = ext_opts }, ext_extra or {})
  require("codecompanion").setup(vim.tbl_deep_extend("force", {
    adapters = { http = { [ADAPTER] = M.adapter(), opts = { show_presets = false } } },
    interactions = {
      chat = {
        adapter = ADAPTER,
        tools = {
          opts = vim.tbl_extend(
            "force",
            { auto_submit_success = false, auto_submit_errors = false },
            tools_opts or {}
          ),
        },
      },
    },
    extensions = { run_bash = ext },
    opts = { log_level = "ERROR" },
  }, cc_extra or {}))
  local mock = require("tests.mocks.http").new({ adapter = ADAPTER })
  _G.__mock_client = mock
  package.loaded["codecompanion.http"] = {
    new = function()
      return _G.__mock_client
    end,
  }
  _G.__ui_inputs = {}
  vim.ui.input = function(opts, cb)
    table.insert(_G.__ui_inputs, opts.prompt)
    cb(_G.__reject_reason)
  end
end

--- Open a chat with run_bash added (as `@{run_bash}` would), unless `add == false`. With
--- `rules`, the chat autoloads CodeCompanion's rules files the way `:CodeCompanionChat` does.
function M.chat(add, rules)
  local Chat = require("codecompanion.interactions.chat")
  local adapters = require("codecompanion.adapters")
  local opts = {
    adapter = adapters.resolve(ADAPTER),
    buffer_context = { bufnr = 1, filetype = "lua" },
  }
  if rules then
    opts.callbacks = require("codecompanion.interactions.shared.rules.helpers").add_callbacks(opts)
  end
  local chat = Chat.new(opts)
  if add ~= false then
    chat.tool_registry:add("run_bash")
  end
  _G.__chat = chat
  return chat.bufnr
end

--- The LLM answers with these tool calls; the user sends a message (`text`, default "please run it").
---@param calls table[] { { id = "call_1", args = { cmd = ... } }, ... }
function M.submit(calls, text)
  local tools = {}
  for _, c in ipairs(calls) do
    table.insert(tools, {
      id = c.id,
      type = "function",
      ["function"] = { name = c.name or "run_bash", arguments = vim.json.encode(c.args) },
    })
  end
  _G.__mock_client:queue_response({ content = "Running it.", tools = tools })
  local chat = _G.__chat
  if text == nil or text == vim.NIL then
    text = "please run it"
  end
  chat:add_buf_message({ role = "user", content = text })
  chat:submit()
end

--- Tool messages in the chat's history: { { id =, content = } }.
function M.tool_outputs()
  local out = {}
  for _, m in ipairs(_G.__chat.messages) do
    if m.role == "tool" then
      table.insert(out, { id = m.tools and m.tools.call_id, content = m.content })
    end
  end
  return out
end

--- Whether the approval block is waiting (its keymaps are set on the chat buffer).
function M.approval_pending()
  for _, map in ipairs(vim.api.nvim_buf_get_keymap(_G.__chat.bufnr, "n")) do
    if map.desc == "Accept" then
      return true
    end
  end
  return false
end

--- Press an approval key (g1 always, g2 accept, g3 reject, g4 cancel) in the chat buffer.
function M.press(keys)
  vim.api.nvim_buf_call(_G.__chat.bufnr, function()
    vim.cmd("normal " .. keys)
  end)
end

function M.buffer_text()
  return table.concat(vim.api.nvim_buf_get_lines(_G.__chat.bufnr, 0, -1, false), "\n")
end

--- Everything the LLM received in the last request, as JSON text.
function M.last_request_text()
  local req = _G.__mock_client:get_last_request()
  return req and vim.json.encode(req.payload) or ""
end

--- How many requests the LLM has received.
function M.request_count()
  return #_G.__mock_client:get_requests()
end

--- The messages of request `n` (default: the last) as the LLM received them:
--- { { role =, content =, visible = } }.
function M.request_messages(n)
  local reqs = _G.__mock_client:get_requests()
  local req = reqs[type(n) == "number" and n or #reqs]
  local out = {}
  for _, m in ipairs(req and req.payload and req.payload.messages or {}) do
    table.insert(out, {
      role = m.role,
      content = type(m.content) == "string" and m.content or vim.inspect(m.content),
      visible = not (m.opts and m.opts.visible == false),
    })
  end
  return out
end

--- The LLM answers the next request with `text` and no tool call.
function M.queue_text(text)
  _G.__mock_client:queue_response({ content = text })
end

--- The user types `text` at the end of the chat buffer (their message, not sent yet).
function M.type_text(text)
  local buf = _G.__chat.bufnr
  local last = vim.api.nvim_buf_line_count(buf)
  vim.api.nvim_buf_set_lines(buf, last, last, false, { text })
end

--- The user sends `text`; the LLM answers `reply`.
function M.send(text, reply)
  M.queue_text(reply)
  _G.__chat:add_buf_message({ role = "user", content = text })
  _G.__chat:submit()
end

--- Whether the chat is idle (run_bash's definition: waiting for the user, nothing typed).
function M.idle()
  return require("run_bash.notices").is_idle(_G.__chat)
end

--- Run `fn` after everything scheduled so far has run.
function M.after_tick()
  _G.__tick = false
  vim.schedule(function()
    _G.__tick = true
  end)
end

--- The schema the LLM received in the last request.
function M.last_tool_schema()
  local req = _G.__mock_client:get_last_request()
  return req and req.payload and req.payload.tools
end

return M
