--- Notices to a CodeCompanion chat that a background session its agent started has ended.
---
--- When such a session ends (exit, crash, timeout, `:RunBashKill`, the host's death), the chat gets
--- a short visible line (`run_bash: session abc123 (npm run dev) exited 1 after 4m12s`) and, unless
--- `background.notify_agent` is false, a hidden message with the exit status and the last lines of
--- output for the agent's next request: with the user's next message ("next_turn"), or as a new
--- turn of its own once the chat is idle ("submit"). A session whose end the agent already knows of
--- (it killed it, or a `wait`, `output` or `list` result said so) gets no hidden message.
---
--- "Idle": the chat waits for the user (no request in flight, no tool running, the user's section is
--- open) and the user has typed nothing there. A chat that is not idle when the notice comes is
--- submitted when its turn ends and it is idle then; if the user is typing, the notice goes with
--- their message instead.
---
--- Only CodeCompanion's chat API is used: `require("codecompanion").buf_get_chat`,
--- `Chat:add_buf_message`, `Chat:add_message(…, { visible = false })`, `Chat:add_callback`
--- (`on_before_submit`, `on_ready`, `on_closed`), `Chat:submit` and the fields the Chat class
--- documents (`current_request`, `tool_orchestrator`, `header_line`, `_last_role`, `_compacting`).
--- A chat that was closed gets nothing, and nothing errors.
local M = {}
local H = {}

local format = require("run_bash.tool_format")

H.tracked = {} ---@type table<string, { chat: table, bufnr: integer }> session id -> its chat
H.ending = {} ---@type table<string, true> the agent is killing these: its kill result says so
H.told = {} ---@type table<string, true> a tool result told the agent that these ended
H.chats = {} ---@type table<integer, run_bash.ChatNotices> chat bufnr -> its notices
H.group = nil

---@class run_bash.ChatNotices
---@field chat table the Chat
---@field queue { id: string, text: string }[] hidden messages not sent yet

---@return string user, string llm
function H.roles()
  local ok, config = pcall(require, "codecompanion.config")
  local c = ok and type(config) == "table" and config.constants or {}
  return c.USER_ROLE or "user", c.LLM_ROLE or "llm"
end

--- `background.notify_agent` in force ("next_turn" when the host has not said).
---@return "next_turn"|"submit"|false
function H.mode()
  local facts = require("run_bash").facts_cached()
  local mode = facts and facts.notify_agent
  if mode == false or mode == "submit" then
    return mode
  end
  return "next_turn"
end

--- Follow a background session the agent of `chat` started (`r`: its run result).
---@param r table
---@param chat table|nil CodeCompanion's Chat (`tools.chat` of the tool call)
function M.track(r, chat)
  if type(r) ~= "table" or type(r.id) ~= "string" then
    return
  end
  if type(chat) ~= "table" or type(chat.bufnr) ~= "number" then
    return
  end
  H.tracked[r.id] = { chat = chat, bufnr = chat.bufnr }
  H.hook(chat)
  if not H.group then
    H.group = vim.api.nvim_create_augroup("RunBash", { clear = false })
    vim.api.nvim_create_autocmd("User", {
      group = H.group,
      pattern = "RunBashExited",
      desc = "run_bash: tell the chat that started a background session that it ended",
      callback = function(ev)
        local ok, err = pcall(M.on_exited, ev.data)
        if not ok then
          require("run_bash").notify("exit notice failed: " .. tostring(err), vim.log.levels.ERROR)
        end
      end,
    })
  end
end

--- The agent asked to kill session `id`: the kill's own result tells it, so no notice follows.
---@param id string
function M.ending(id)
  if H.tracked[id] then
    H.ending[id] = true
  end
end

--- A tool result showed the agent session `s`; if it had ended, the agent knows.
---@param s table session info (or a wait or output result)
function M.told(s)
  if type(s) ~= "table" or type(s.id) ~= "string" then
    return
  end
  if s.status == "running" or s.status == "awaiting_approval" then
    return
  end
  if H.tracked[s.id] or H.queued(s.id) then
    H.told[s.id] = true
  end
end

---@param id string
---@return boolean
function H.queued(id)
  for _, state in pairs(H.chats) do
    for _, n in ipairs(state.queue) do
      if n.id == id then
        return true
      end
    end
  end
  return false
end

--- Register the chat's callbacks once.
---@param chat table
---@return run_bash.ChatNotices
function H.hook(chat)
  local state = H.chats[chat.bufnr]
  if state and state.chat == chat then
    return state
  end
  state = { chat = chat, queue = {} }
  H.chats[chat.bufnr] = state
  if type(chat.add_callback) == "function" then
    -- A callback that returns false cancels the submit: these return nothing.
    chat:add_callback("on_before_submit", function(c)
      H.flush(c)
    end)
    chat:add_callback("on_ready", function(c)
      if H.mode() == "submit" then
        vim.schedule(function()
          H.submit_if_idle(c)
        end)
      end
    end)
    chat:add_callback("on_closed", function(c)
      H.chats[c.bufnr] = nil
    end)
  end
  return state
end

--- The chat of a tracked session if it is still open.
---@param t { chat: table, bufnr: integer }
---@return table|nil
function H.open_chat(t)
  if not vim.api.nvim_buf_is_valid(t.bufnr) then
    return nil
  end
  local ok, cc = pcall(require, "codecompanion")
  if not ok or type(cc) ~= "table" or type(cc.buf_get_chat) ~= "function" then
    return nil
  end
  local gok, chat = pcall(cc.buf_get_chat, t.bufnr)
  if not gok or chat ~= t.chat then
    return nil
  end
  return chat
end

--- The chat waits for the user: no request in flight, no tool running, the user's section open.
---@param chat table
---@return boolean
function H.waiting_for_user(chat)
  local user = H.roles()
  return chat.current_request == nil
    and chat.tool_orchestrator == nil
    and not chat._compacting
    and chat._last_role == user
end

--- Whether the user has typed something in the chat's input section.
---@param chat table
---@return boolean
function H.typing(chat)
  local ok, parser = pcall(require, "codecompanion.interactions.chat.parser")
  if not ok or type(parser.messages) ~= "function" then
    return true -- cannot tell: never submit over what the user may be writing
  end
  local pok, msg = pcall(parser.messages, chat, chat.header_line)
  if not pok then
    return true
  end
  return type(msg) == "table" and type(msg.content) == "string" and vim.trim(msg.content) ~= ""
end

--- Idle: waiting for the user, who has typed nothing.
---@param chat table
---@return boolean
function M.is_idle(chat)
  return H.waiting_for_user(chat) and not H.typing(chat)
end

--- Show `line` in the chat: above the user's header while the chat waits for the user (so it never
--- becomes part of their message), else at the end of the turn in progress.
---@param chat table
---@param line string
function H.show(chat, line)
  local _, llm = H.roles()
  local bufnr = chat.bufnr
  if H.waiting_for_user(chat) and type(chat.header_line) == "number" and chat.header_line > 1 then
    local before = vim.api.nvim_buf_line_count(bufnr)
    chat:add_buf_message({ content = line .. "\n\n" }, { insert_at = chat.header_line - 1 })
    -- The user's header moved down: parsing the next message starts there.
    chat.header_line = chat.header_line + vim.api.nvim_buf_line_count(bufnr) - before
  else
    chat:add_buf_message({ role = llm, content = "\n" .. line .. "\n\n" })
  end
end

--- Session `info` ended (the `RunBashExited` event).
---@param info table
function M.on_exited(info)
  local id = type(info) == "table" and info.id or nil
  local t = id and H.tracked[id]
  if not t then
    return
  end
  H.tracked[id] = nil
  if H.ending[id] then
    H.ending[id] = nil
    return
  end
  local chat = H.open_chat(t)
  if not chat then
    H.told[id] = nil
    return -- the chat was closed: nobody to tell
  end
  H.show(chat, format.exit_line(info))
  local mode = H.mode()
  if mode == false or H.told[id] then
    H.told[id] = nil
    return
  end
  local state = H.hook(chat)
  table.insert(state.queue, { id = id, text = format.exit_notice(info) })
  if mode == "submit" then
    -- On the next tick, so that sessions that ended together go in one turn.
    vim.schedule(function()
      H.submit_if_idle(chat)
    end)
  end
end

--- Add the queued notices to the chat's messages (hidden); returns how many.
---@param chat table
---@return integer
function H.flush(chat)
  local state = H.chats[chat.bufnr]
  if not state or state.chat ~= chat or #state.queue == 0 then
    return 0
  end
  local user = H.roles()
  local queue = state.queue
  state.queue = {}
  local added = 0
  for _, n in ipairs(queue) do
    if not H.told[n.id] then
      chat:add_message({ role = user, content = n.text }, { visible = false })
      added = added + 1
    end
    H.told[n.id] = nil
  end
  return added
end

--- "submit": start a turn for the queued notices if the chat is open and idle.
---@param chat table
---@return boolean submitted
function H.submit_if_idle(chat)
  local state = H.chats[chat.bufnr]
  if not state or #state.queue == 0 then
    return false
  end
  if not H.open_chat({ chat = chat, bufnr = chat.bufnr }) or not M.is_idle(chat) then
    return false
  end
  if H.flush(chat) == 0 then
    return false
  end
  -- auto_submit: the user's (empty) section is not parsed and no empty user message is added.
  chat:submit({ auto_submit = true })
  return true
end

M._H = H

return M
