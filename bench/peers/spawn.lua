-- Peer for workload 1: Neovim's jobstart.
--   nvim --headless -u NONE -l spawn.lua COUNT LIVE argv|shell
-- Runs COUNT `true`, at most LIVE at once; a job's on_exit comes after its
-- output was read.  Prints "rate <tasks/s>".
local count = tonumber(arg[1]) or 2000
local live = tonumber(arg[2]) or 64
local shell = arg[3] == 'shell'
local uv = vim.uv or vim.loop
local started, finished, running = 0, 0, 0
local t0 = uv.hrtime()

local function one()
  started = started + 1
  running = running + 1
  local cmd = shell and 'true' or { 'true' }
  vim.fn.jobstart(cmd, {
    on_stdout = function() end,
    on_stderr = function() end,
    on_exit = function()
      running = running - 1
      finished = finished + 1
      while running < live and started < count do
        one()
      end
    end,
  })
end

while running < live and started < count do
  one()
end
vim.wait(600000, function() return finished == count end, 1)
local ns = uv.hrtime() - t0
io.stdout:write(string.format('rate %.6g\n', count * 1e9 / ns))
vim.cmd('qall!')
