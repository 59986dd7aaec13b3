-- The Lua module's bounds (LU-1 with N-11's rule), measured as
-- bench/node/bounds.mjs measures the Node package's: the host's RSS while
-- tasks end that nobody reads (1,000 of 100 kB; 60 of 1 MB), the host
-- learning of the ends only from on_task_done; and the CPU one task costs
-- (spawn, end, drop) with 50 and with 5,000 records held (keep_finished
-- set so that the registry holds that many, then each end drops one).
--
--   LUA_CPATH='build/bindings/lua/?.so;;' luajit bench/lua/bounds.lua
--   LUA_CPATH='build/bindings/lua/?.so;;' nvim --headless -u NONE -i NONE -n -c 'luafile bench/lua/bounds.lua'
local nvim = type(vim) == 'table' and type(vim.api) == 'table'
local uv = nvim and (vim.uv or vim.loop) or require('luv')
local uvt = require('uvtasks')

local function out(s)
  io.stdout:write(s, '\n')
  io.stdout:flush()
end

local function run_until(pred)
  if nvim then
    vim.wait(600000, pred, 1)
    return
  end
  while not pred() do
    uv.run('once')
  end
end

local function rss_mib()
  local f = io.open('/proc/self/statm', 'r')
  local _, pages = f:read('*n', '*n')
  f:close()
  return pages * 4096 / (1024 * 1024)
end

-- `n` tasks of `command`, `batch` at a time, the ends heard only by a
-- listener.
local function listen_only(reg, n, command, batch)
  local seen = 0
  local off = reg:on_task_done(function()
    seen = seen + 1
  end)
  local started = 0
  while started < n do
    local k = math.min(batch, n - started)
    for _ = 1, k do
      reg:spawn({ command = command })
    end
    started = started + k
    run_until(function()
      return seen == started
    end)
  end
  off()
end

local function close(reg)
  local closed = false
  reg:close(function()
    closed = true
  end)
  run_until(function()
    return closed
  end)
end

local function rss_row(n, bytes)
  local reg = uvt.new()
  reg:attach_surface('bench')
  local before = rss_mib()
  local samples = {}
  for _ = 1, 4 do
    listen_only(reg, n / 4, 'head -c ' .. bytes .. ' /dev/zero', 20)
    samples[#samples + 1] = string.format('%.0f', rss_mib())
  end
  out(string.format('%d tasks of %d B never read: RSS %.0f -> %s MiB (each quarter), records %d',
    n, bytes, before, table.concat(samples, ' -> '), reg:metrics().records))
  close(reg)
end

local function cpu_row(records)
  local reg = uvt.new({ keep_finished = records, max_unread_bytes = math.huge })
  reg:attach_surface('bench')
  listen_only(reg, records, 'true', 50) -- fill
  local n = 1000
  local c0 = os.clock()
  uv.update_time()
  local t0 = uv.hrtime()
  listen_only(reg, n, 'true', 50)
  local cpu = os.clock() - c0
  local wall = (uv.hrtime() - t0) / 1e6
  out(string.format('at %d records: %.3f ms CPU per task (spawn + end + drop), %.2f ms wall; records %d',
    records, cpu * 1000 / n, wall / n, reg:metrics().records))
  close(reg)
end

out('bench-lua-bounds: ' .. (nvim and 'nvim' or 'luajit') .. ', uvtasks ' .. uvt.version)
rss_row(1000, 100000)
rss_row(60, 1000000)
cpu_row(50)
cpu_row(5000)
if nvim then
  vim.cmd('qa!')
end
