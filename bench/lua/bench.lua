-- uvtasks against jobstart in the same headless Neovim (LU-4's bench
-- row, issue 36): tasks/s and a 1 ms timer's lateness (p99) under a spawn
-- storm, in a small Neovim and in one holding UVTL_BENCH_MIB of Lua data;
-- and what survives jobstop against a uvtasks kill of the same
-- TERM-ignoring tree.  Prints one JSON object per row, then quits.
-- Run by bench/lua/run.sh:  nvim --headless -u NONE -i NONE -n -c 'luafile bench/lua/bench.lua'
local uv = vim.uv or vim.loop
local uvt = require('uvtasks')

local N = tonumber(os.getenv('UVTL_BENCH_N') or '') or 400
local INFLIGHT = tonumber(os.getenv('UVTL_BENCH_INFLIGHT') or '') or 16
local MIB = tonumber(os.getenv('UVTL_BENCH_MIB') or '') or 0

local out = io.stdout
local function row(t)
  local parts = {}
  for k, v in pairs(t) do
    parts[#parts + 1] = string.format('"%s": %s', k, type(v) == 'string' and string.format('%q', v) or tostring(v))
  end
  table.sort(parts)
  out:write('{' .. table.concat(parts, ', ') .. '}\n')
  out:flush()
end

-- Lua data the host holds (a long session with big buffers).
local ballast = {}
if MIB > 0 then
  local per = 1024 * 1024 / 8
  for m = 1, MIB do
    local t = {}
    for i = 1, per do
      t[i] = i + 0.5
    end
    ballast[m] = t
  end
end

local function p99(xs)
  table.sort(xs)
  if #xs == 0 then
    return 0
  end
  return xs[math.max(1, math.ceil(#xs * 0.99))]
end

-- Runs `start(done)` N times with INFLIGHT at once; a 1 ms repeating timer
-- measures how late each of its turns comes.
local function storm(name, start)
  local late = {}
  local timer = uv.new_timer()
  local last = uv.hrtime()
  timer:start(1, 1, function()
    local now = uv.hrtime()
    local l = (now - last) / 1e6 - 1
    late[#late + 1] = l > 0 and l or 0
    last = now
  end)
  local started, finished = 0, 0
  local t0 = uv.hrtime()
  local function next_one()
    if started >= N then
      return
    end
    started = started + 1
    start(function()
      finished = finished + 1
      next_one()
    end)
  end
  for _ = 1, INFLIGHT do
    next_one()
  end
  vim.wait(600000, function()
    return finished >= N
  end, 1)
  local secs = (uv.hrtime() - t0) / 1e9
  timer:stop()
  timer:close()
  row({ row = name, host_mib = MIB, tasks = N, inflight = INFLIGHT, tasks_per_s = math.floor(N / secs + 0.5),
        timer_p99_late_ms = math.floor(p99(late) * 100 + 0.5) / 100 })
end

local reg = uvt.new({ keep_finished = 50 })
reg:attach_surface('bench')
local waiting = {}
reg:on_task_done(function(s)
  local f = waiting[s.id]
  if f then
    waiting[s.id] = nil
    f()
  end
end)

for round = 1, 2 do
  storm('jobstart', function(done)
    vim.fn.jobstart({ 'true' }, { on_exit = function() done() end })
  end)
  storm('uvtasks', function(done)
    local id = reg:spawn({ argv = { 'true' } })
    waiting[id] = done
  end)
end

-- Survivors: the same TERM-ignoring tree stopped by jobstop and by a kill.
-- TERM-ignoring processes, a job with a process group of its own (set -m)
-- and a child that left the session (setsid).
local TREE = "trap '' TERM; (trap '' TERM; sleep 300) & set -m; (trap '' TERM; sleep 300) & set +m; " ..
  "setsid sleep 300 & sleep 300 & wait"
local function marked(mark)
  local n = 0
  local p = io.popen('grep -lzxF -e "' .. mark .. '" /proc/[0-9]*/environ 2>/dev/null')
  for _ in p:lines() do
    n = n + 1
  end
  p:close()
  return n
end
local function kill_marked(mark)
  os.execute('for p in $(grep -lzxF -e "' .. mark .. '" /proc/[0-9]*/environ 2>/dev/null | sed "s|/proc/||;s|/environ||"); do kill -9 $p; done')
end

local m1 = 'UVTL_BENCH_MARK=' .. uv.os_getpid() .. '-job'
local exited = false
local job = vim.fn.jobstart({ 'bash', '-c', TREE }, { env = { UVTL_BENCH_MARK = m1:match('=(.*)') }, on_exit = function() exited = true end })
vim.wait(10000, function() return marked(m1) >= 5 end, 5)
local before = marked(m1)
local t0 = uv.hrtime()
vim.fn.jobstop(job)
vim.wait(30000, function() return exited end, 5)
-- jobstop's own SIGKILL comes 2 s after its SIGTERM (Neovim's KILL_TIMEOUT_MS): look after that.
vim.wait(2500, function() return false end, 50)
row({ row = 'jobstop', processes_before = before, survivors = marked(m1), exit_seen_ms = math.floor((uv.hrtime() - t0) / 1e6) })
kill_marked(m1)

local m2 = 'UVTL_BENCH_MARK=' .. uv.os_getpid() .. '-uvt'
local id = reg:spawn({ command = TREE, env = { UVTL_BENCH_MARK = m2:match('=(.*)') } })
vim.wait(10000, function() return marked(m2) >= 5 end, 5)
before = marked(m2)
local ended = false
reg:wait(id, nil, function() ended = true end)
t0 = uv.hrtime()
reg:kill(id)
vim.wait(30000, function() return ended end, 5)
row({ row = 'uvtasks-kill', processes_before = before, survivors = marked(m2), settled_ms = math.floor((uv.hrtime() - t0) / 1e6) })
kill_marked(m2)

-- With a cgroup per task (where this host may make them), the setsid
-- child goes too.
local okc, creg = pcall(uvt.new, { cgroups = true })
if okc then
  creg:attach_surface('bench')
  local m3 = 'UVTL_BENCH_MARK=' .. uv.os_getpid() .. '-cg'
  local cid = creg:spawn({ command = TREE, env = { UVTL_BENCH_MARK = m3:match('=(.*)') } })
  vim.wait(10000, function() return marked(m3) >= 5 end, 5)
  before = marked(m3)
  local cended = false
  creg:wait(cid, nil, function() cended = true end)
  t0 = uv.hrtime()
  creg:kill(cid)
  vim.wait(30000, function() return cended end, 5)
  row({ row = 'uvtasks-kill-cgroups', processes_before = before, survivors = marked(m3), settled_ms = math.floor((uv.hrtime() - t0) / 1e6) })
  kill_marked(m3)
  local cc = false
  creg:close(function() cc = true end)
  vim.wait(30000, function() return cc end, 5)
else
  row({ row = 'uvtasks-kill-cgroups', unavailable = tostring(creg) })
end

local closed = false
reg:close(function() closed = true end)
vim.wait(30000, function() return closed end, 5)
vim.cmd('qa!')
