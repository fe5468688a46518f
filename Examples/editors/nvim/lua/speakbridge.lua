-- speakbridge.nvim: dictation from `speakbridge serve --sink jsonl:PATH` appears at the cursor (Neovim 0.7+).
--
-- Install: put this folder (Examples/editors/nvim) on 'runtimepath', then in init.lua:
--   require("speakbridge").setup({})   -- reads $XDG_RUNTIME_DIR/speakbridge/dictation.fifo (see runtime_dir)
-- Commands: :SpeakBridgeStart [PATH]   :SpeakBridgeStop   :SpeakBridgeStatus
--
-- Flow: a `cat` loop in a job reads the FIFO (Neovim never blocks; the loop reopens the FIFO when the daemon
-- restarts) -> each line is parsed (a JSON object from the `jsonl:` sink, or plain text from the `fifo:` sink)
-- -> a framed line whose seq is not above the last one taken for its (device, session) is dropped (the daemon
-- repeats at most one line after a crash) -> the chunk joins a queue -> the queue is inserted at the cursor, one
-- chunk at a time. An insert that fails (buffer not modifiable, an error anywhere) keeps the chunk at the head of
-- the queue: it is retried every half second and on the next chunk, and nothing is lost.
--
-- Where a chunk goes (the current window, in every mode): in Insert and Replace mode at the cursor; in the other
-- modes before the character under the cursor (as `i` would put it), or after it when it is the last character of
-- a non-empty line. The cursor ends right after the chunk, so the next chunk follows it. One space separates the
-- chunk from the text before and after it where both sides are words: none at the start of a line, after a space
-- or an opening bracket, before a space or the end of the line, and never before punctuation (`.`, `,`, `?`...).
-- A line break inside a chunk becomes a space; no line break is ever added.
local M = {}

local uv = vim.uv or vim.loop

-- The daemon's runtime directory, by the daemon's rule: $XDG_RUNTIME_DIR/speakbridge; else /run/user/UID/speakbridge
-- if /run/user/UID is a private directory of ours; else $XDG_STATE_HOME/speakbridge/run. Never a name in /tmp,
-- where another user could create the FIFO first and read the dictation.
local function runtime_dir()
  local xdg = vim.env.XDG_RUNTIME_DIR
  if xdg and xdg:sub(1, 1) == "/" then
    return xdg .. "/speakbridge"
  end
  local run = "/run/user/" .. uv.getuid()
  local st = uv.fs_lstat(run)
  if st and st.type == "directory" and st.uid == uv.getuid() and st.mode % 512 == 448 then -- 448 = 0700
    return run .. "/speakbridge"
  end
  local state = vim.env.XDG_STATE_HOME
  if not state or state:sub(1, 1) ~= "/" then
    state = vim.env.HOME .. "/.local/state"
  end
  return state .. "/speakbridge/run"
end

local defaults = { fifo = runtime_dir() .. "/dictation.fifo" }
local config = vim.deepcopy(defaults)

-- State kept for the whole editor session, across FIFO reopens and :SpeakBridgeStop/Start.
local job = nil
local partial = ""
local stopping = false
local taken = {} -- "device\nsession" -> highest seq queued or inserted
local queue = {} -- chunks read but not inserted yet, oldest first: { text = ... }
local counts = { inserted = 0, dropped = 0 }
local last_error = nil
local retry_timer = nil

-- A chunk starting with one of these never gets a space before it; text ending in an opener never gets one after.
local closing = {}
for _, c in ipairs({ ".", ",", ";", ":", "!", "?", ")", "]", "}", "%", "…", "»", "›", "”", "’", "。", "，", "、", "！", "？", "：", "；", "）", "」", "』" }) do
  closing[c] = true
end
local opening = {}
for _, c in ipairs({ "(", "[", "{", "“", "‘", "«", "‹", "¿", "¡", "（", "「", "『" }) do
  opening[c] = true
end

-- First and last character (not byte) of a string; "" for an empty one.
local function first_char(s)
  return vim.fn.matchstr(s, "^.")
end
local function last_char(s)
  return vim.fn.matchstr(s, ".$")
end

-- Whether a space belongs between the characters `left` and `right` ("" = line start or end).
local function needs_space(left, right)
  if left == "" or right == "" then
    return false
  end
  if left:match("^%s$") or right:match("^%s$") then
    return false
  end
  return not opening[left] and not closing[right]
end

-- Inserts one chunk's text in the current window as described at the top. Errors propagate (caller holds the chunk).
local function insert_text(text)
  text = text:gsub("\r?\n", " ")
  if text == "" then
    return
  end
  local win = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_win_get_buf(win)
  if not vim.bo[buf].modifiable then
    error("buffer " .. buf .. " is not modifiable", 0)
  end
  local cursor = vim.api.nvim_win_get_cursor(win)
  local row, col = cursor[1], cursor[2]
  local line = vim.api.nvim_buf_get_lines(buf, row - 1, row, true)[1]
  local at = math.min(col, #line)
  local mode = vim.api.nvim_get_mode().mode:sub(1, 1)
  if mode ~= "i" and mode ~= "R" and #line > 0 then
    local under = first_char(line:sub(at + 1, at + 4))
    if at + #under >= #line then
      at = #line -- on the last character: after it
    end
  end
  -- The characters either side (a UTF-8 character is at most 4 bytes: no copy of a long line).
  local lead = needs_space(last_char(line:sub(math.max(1, at - 3), at)), first_char(text)) and " " or ""
  local trail = needs_space(last_char(text), first_char(line:sub(at + 1, at + 4))) and " " or ""
  vim.api.nvim_buf_set_text(buf, row - 1, at, row - 1, at, { lead .. text .. trail })
  vim.api.nvim_win_set_cursor(win, { row, at + #lead + #text })
end

local function notify(msg, level)
  vim.notify("speakbridge: " .. msg, level or vim.log.levels.INFO)
end

local drain

local function schedule_retry()
  if retry_timer then
    return
  end
  retry_timer = uv.new_timer()
  retry_timer:start(500, 500, vim.schedule_wrap(function()
    drain()
  end))
end

-- Inserts the queue in order; stops at the first failure and keeps that chunk (and the rest) for a retry.
drain = function()
  while #queue > 0 do
    local ok, err = pcall(insert_text, queue[1].text)
    if not ok then
      local msg = tostring(err)
      if msg ~= last_error then
        last_error = msg
        notify(#queue .. " chunk(s) held, not inserted: " .. msg .. " (retrying)", vim.log.levels.WARN)
      end
      schedule_retry()
      return
    end
    table.remove(queue, 1)
    counts.inserted = counts.inserted + 1
  end
  if last_error then
    last_error = nil
    notify("held chunks inserted")
  end
  if retry_timer then
    retry_timer:stop()
    retry_timer:close()
    retry_timer = nil
  end
end

-- A frame from the `jsonl:` sink, or nil: an object with string device, session, text and an integer seq.
local function frame(s)
  local ok, obj = pcall(vim.json.decode, s)
  if not ok or type(obj) ~= "table" then
    return nil
  end
  local seq = obj.seq
  if type(obj.device) ~= "string" or type(obj.session) ~= "string" or type(obj.text) ~= "string"
    or type(seq) ~= "number" or seq < 0 or seq % 1 ~= 0 then
    return nil
  end
  return obj
end

-- One line from the FIFO: queue it unless it is a framed chunk already taken.
local function take(line)
  local obj = line:sub(1, 1) == "{" and frame(line) or nil
  if not obj then
    -- A line torn by a writer killed mid-line (longer than the atomic 4096 bytes) is followed by the whole object;
    -- the torn part is repeated after the restart, so only the last object in the line counts.
    local start = nil
    local from = 2
    while true do
      local i = line:find('{"device":', from, true)
      if not i then
        break
      end
      start, from = i, i + 1
    end
    obj = start and frame(line:sub(start)) or nil
  end
  if obj then
    local key = obj.device .. "\n" .. obj.session
    if taken[key] and obj.seq <= taken[key] then
      counts.dropped = counts.dropped + 1
      return
    end
    taken[key] = obj.seq
    table.insert(queue, { text = obj.text })
  elseif line ~= "" then
    table.insert(queue, { text = line }) -- the plain `fifo:` sink: the line is the text
  end
end

local function on_stdout(_, data)
  -- data: lines split at "\n"; the last element is the start of an unfinished line.
  if not data then
    return
  end
  data[1] = partial .. data[1]
  partial = table.remove(data)
  for _, line in ipairs(data) do
    take(line)
  end
  drain()
end

function M.start(path)
  if job then
    notify("already reading " .. config.fifo)
    return
  end
  if path and path ~= "" then
    config.fifo = vim.fn.expand(path)
  end
  if vim.fn.getftype(config.fifo) ~= "fifo" then
    notify(config.fifo .. " is not a FIFO yet; start `speakbridge serve --sink jsonl:" .. config.fifo .. "`",
      vim.log.levels.WARN)
  end
  stopping = false
  partial = ""
  -- A loop, because cat ends whenever the daemon closes its end (e.g. on restart).
  job = vim.fn.jobstart({ "sh", "-c", 'while :; do cat -- "$1" 2>/dev/null || sleep 1; done', "sh", config.fifo }, {
    on_stdout = vim.schedule_wrap(on_stdout),
    on_exit = function()
      job = nil
      if not stopping then
        vim.schedule(function()
          notify("reader stopped", vim.log.levels.WARN)
        end)
      end
    end,
  })
  if job <= 0 then
    job = nil
    notify("cannot start the reader", vim.log.levels.ERROR)
  end
end

function M.stop()
  stopping = true
  if job then
    vim.fn.jobstop(job)
    job = nil
  end
end

-- What the plugin holds and has done (for :SpeakBridgeStatus and scripts).
function M.status()
  return {
    fifo = config.fifo,
    reading = job ~= nil,
    held = #queue,
    inserted = counts.inserted,
    dropped = counts.dropped,
    error = last_error,
  }
end

function M.setup(opts)
  config = vim.tbl_extend("force", defaults, opts or {})
  vim.api.nvim_create_user_command("SpeakBridgeStart", function(o)
    M.start(o.args)
  end, { nargs = "?", complete = "file" })
  vim.api.nvim_create_user_command("SpeakBridgeStop", M.stop, {})
  vim.api.nvim_create_user_command("SpeakBridgeStatus", function()
    print(vim.inspect(M.status()))
  end, {})
  if config.autostart then
    M.start()
  end
end

return M
