-- speakbridge.nvim: text dictated into `speakbridge serve --sink fifo:PATH` appears at the cursor.
--
-- Install: put this folder (Examples/editors/nvim) on 'runtimepath', then in init.lua:
--   require("speakbridge").setup({})   -- FIFO: $XDG_RUNTIME_DIR/speakbridge/dictation.fifo (see runtime_dir)
-- Commands: :SpeakBridgeStart [PATH]   :SpeakBridgeStop
--
-- Each line the daemon writes (one chunk) is inserted at the cursor of the window that is current when it
-- arrives, followed by a space, in Normal and Insert mode alike, as one undoable change per chunk. The FIFO is read
-- by `cat` in a job, so Neovim never blocks; when the daemon restarts, the job is restarted too.
local M = {}

-- The daemon's runtime directory, by the daemon's rule: $XDG_RUNTIME_DIR/speakbridge; else /run/user/UID/speakbridge
-- if /run/user/UID is a private directory of ours; else $XDG_STATE_HOME/speakbridge/run. Never a name in /tmp,
-- where another user could create the FIFO first and read the dictation.
local function runtime_dir()
  local xdg = vim.env.XDG_RUNTIME_DIR
  if xdg and xdg:sub(1, 1) == "/" then
    return xdg .. "/speakbridge"
  end
  local uv = vim.uv or vim.loop
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

local defaults = {
  fifo = runtime_dir() .. "/dictation.fifo",
  separator = " ",
}
local config = vim.deepcopy(defaults)
local job = nil
local partial = ""
local stopping = false

local function insert(text)
  if text == "" then
    return
  end
  local buf = vim.api.nvim_get_current_buf()
  if not vim.bo[buf].modifiable then
    vim.notify("speakbridge: buffer is not modifiable; dropped: " .. text, vim.log.levels.WARN)
    return
  end
  -- "c": characterwise; after = true in Normal mode (append like `a`), false in Insert mode (at the cursor).
  local insert_mode = vim.api.nvim_get_mode().mode:sub(1, 1) == "i"
  vim.api.nvim_put({ text .. config.separator }, "c", not insert_mode, true)
end

local function on_stdout(_, data)
  -- data: lines split at "\n"; the last element is the start of an unfinished line.
  if not data then
    return
  end
  data[1] = partial .. data[1]
  partial = table.remove(data)
  for _, line in ipairs(data) do
    insert(line)
  end
end

function M.start(path)
  if job then
    vim.notify("speakbridge: already reading " .. config.fifo)
    return
  end
  if path and path ~= "" then
    config.fifo = vim.fn.expand(path)
  end
  if vim.fn.getftype(config.fifo) ~= "fifo" then
    vim.notify("speakbridge: " .. config.fifo .. " is not a FIFO yet; start `speakbridge serve --sink fifo:"
      .. config.fifo .. "`", vim.log.levels.WARN)
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
          vim.notify("speakbridge: reader stopped", vim.log.levels.WARN)
        end)
      end
    end,
  })
  if job <= 0 then
    job = nil
    vim.notify("speakbridge: cannot start the reader", vim.log.levels.ERROR)
  end
end

function M.stop()
  stopping = true
  if job then
    vim.fn.jobstop(job)
    job = nil
  end
end

function M.setup(opts)
  config = vim.tbl_extend("force", defaults, opts or {})
  vim.api.nvim_create_user_command("SpeakBridgeStart", function(o)
    M.start(o.args)
  end, { nargs = "?", complete = "file" })
  vim.api.nvim_create_user_command("SpeakBridgeStop", M.stop, {})
  if config.autostart then
    M.start()
  end
end

return M
