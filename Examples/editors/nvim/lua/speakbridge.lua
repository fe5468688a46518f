-- speakbridge.nvim: dictation from `speakbridge serve --sink jsonl:PATH` appears at the cursor (Neovim 0.7+).
--
-- Install: put this folder (Examples/editors/nvim) on 'runtimepath', then in init.lua:
--   require("speakbridge").setup({})   -- reads $XDG_RUNTIME_DIR/speakbridge/dictation.fifo (see runtime_dir)
-- Commands: :SpeakBridgeStart [PATH]   :SpeakBridgeStop   :SpeakBridgeStatus
--
-- Flow: Neovim reads the FIFO itself, non-blocking (opened read-write: the daemon's restarts are no end of file;
-- a timer opens it once it exists) -> each line is parsed (a JSON object from the `jsonl:` sink, or plain text
-- from the `fifo:` sink) -> a framed line whose seq is not above the last one taken for its (device, session) is
-- dropped (the daemon repeats at most one line after a crash) -> the chunk joins a queue -> the queue is inserted
-- at the cursor, one chunk at a time. An insert that fails (buffer not modifiable, an error anywhere) keeps the chunk at the head of
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
local reader = nil -- { pipe, ino, dev } of the open FIFO
local watch_timer = nil
local warned = false
local partial = ""
local taken = {} -- "device\nsession" -> highest seq queued or inserted
local queue = {} -- chunks read but not inserted yet, oldest first: { text = ... }
local counts = { inserted = 0, dropped = 0 }
local last_error = nil
local retry_timer = nil

-- A chunk starting with one of these never gets a space before it; text ending in an opener never gets one after.
local closing = {}
for _, c in ipairs({ ".", ",", ";", ":", "!", "?", ")", "]", "}", "%", "…", "»", "›", "”", "’",
                     "。", "，", "、", "！", "？", "：", "；", "）", "」", "』" }) do
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

-- Bytes read from the FIFO: split into lines (the last piece may be the start of an unfinished line).
local function on_data(data)
  local lines = vim.split(partial .. data, "\n", { plain = true })
  partial = table.remove(lines)
  for _, line in ipairs(lines) do
    if not pcall(take, line) then
      table.insert(queue, { text = line }) -- never lose a line to a bug in parsing: insert it as it is
    end
  end
  drain()
end

-- The FIFO at `path` if it is one of ours that nobody else may open (the daemon's rule): anything else could
-- be another user's, feeding us text.
local function own_fifo(st)
  return st and st.type == "fifo" and st.uid == uv.getuid() and st.mode % 64 == 0
end

local function close_reader()
  if reader then
    reader.pipe:read_stop()
    reader.pipe:close()
    reader = nil
  end
end

-- Opens the FIFO read-write and non-blocking, in this process: the open never waits for the daemon, the daemon's
-- restarts are no end of file (we hold a write end too), and the reader dies with Neovim (no helper process that
-- could outlive it and swallow a line).
local function open_reader()
  local st = uv.fs_lstat(config.fifo)
  if not own_fifo(st) then
    return false
  end
  local c = uv.constants
  local fd = uv.fs_open(config.fifo, c.O_RDWR + c.O_NONBLOCK, 0)
  if not fd then
    return false
  end
  local fst = uv.fs_fstat(fd)
  if not own_fifo(fst) or fst.ino ~= st.ino then -- replaced between lstat and open
    uv.fs_close(fd)
    return false
  end
  local pipe = uv.new_pipe(false)
  pipe:open(fd)
  reader = { pipe = pipe, ino = fst.ino, dev = fst.dev }
  pipe:read_start(function(err, data)
    vim.schedule(function()
      if data then
        on_data(data)
      elseif reader and reader.pipe == pipe then
        close_reader() -- an error: the watch timer opens it again
        notify("reading " .. config.fifo .. " failed: " .. tostring(err), vim.log.levels.WARN)
      end
    end)
  end)
  return true
end

-- Every second while started: open the FIFO once it exists; reopen it when the path names another FIFO now.
local function watch()
  if reader then
    local st = uv.fs_lstat(config.fifo)
    if st and (st.ino ~= reader.ino or st.dev ~= reader.dev) then
      close_reader()
    end
  end
  if not reader and open_reader() then
    warned = false
  elseif not reader and not warned then
    warned = true
    notify(config.fifo .. " is not a FIFO of yours yet; start `speakbridge serve --sink jsonl:" .. config.fifo
      .. "` (waiting for it)", vim.log.levels.WARN)
  end
end

function M.start(path)
  if watch_timer then
    notify("already reading " .. config.fifo)
    return
  end
  if path and path ~= "" then
    config.fifo = vim.fn.expand(path)
  end
  partial = ""
  warned = false
  watch()
  watch_timer = uv.new_timer()
  watch_timer:start(1000, 1000, vim.schedule_wrap(watch))
end

function M.stop()
  if watch_timer then
    watch_timer:stop()
    watch_timer:close()
    watch_timer = nil
  end
  close_reader()
end

-- What the plugin holds and has done (for :SpeakBridgeStatus and scripts).
function M.status()
  return {
    fifo = config.fifo,
    reading = reader ~= nil,
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
