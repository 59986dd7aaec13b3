-- LU-3: the end of the host stops every task.  Neovim's :qa (VimLeavePre)
-- closes the registry: every task stopped, quiet before exit; a SIGKILLed
-- host leaves nothing running with the guardian; the end of a luajit
-- script (lua_close) closes a registry left open.  Each host under test is
-- a child process (test/fixtures/host.lua), started as a task of our own
-- registry; the processes of its tasks carry a mark we look for in /proc.
local H = require('harness')
local uvt = require('uvtasks')

local NVIM = { 'nvim', '--headless', '-u', 'NONE', '-i', 'NONE', '-n', '-c' }
local LUAJIT = os.getenv('UVTL_LUAJIT') or 'luajit'

local function read_ready(path)
  local s = H.read_file(path)
  if s == nil then
    return nil
  end
  local pids = {}
  for p in s:gmatch('%d+') do
    pids[#pids + 1] = tonumber(p)
  end
  return pids
end

-- The session id of a process (field 6 of /proc/<pid>/stat).
local function session_of(pid)
  local s = H.read_file('/proc/' .. pid .. '/stat')
  if s == nil then
    return nil
  end
  local rest = s:match('%) (.*)$')
  local fields = {}
  for w in rest:gmatch('%S+') do
    fields[#fields + 1] = w
  end
  return tonumber(fields[4])
end

local function kill_all(pids)
  for _, p in ipairs(pids) do
    H.uv.kill(p, 'sigkill')
  end
end

-- Starts the host; returns once its tasks run.
local function host(kind, env)
  local reg = uvt.new()
  reg:attach_surface('test')
  local dir = H.tmpdir()
  local mark = H.mark('host')
  env.UVTL_HOST_OUT = dir .. '/ready'
  env.UVTL_HOST_MARK = mark
  local argv
  if kind == 'nvim' then
    argv = {}
    for i, a in ipairs(NVIM) do
      argv[i] = a
    end
    argv[#argv + 1] = 'luafile ' .. os.getenv('UVTL_TEST_DIR') .. '/fixtures/host.lua'
  else
    argv = { LUAJIT, os.getenv('UVTL_TEST_DIR') .. '/fixtures/host.lua' }
  end
  local id = reg:spawn({ argv = argv, env = env, grace_ms = 200 })
  local pids
  H.wait_until(function()
    pids = read_ready(env.UVTL_HOST_OUT)
    if pids == nil and reg:get(id).status ~= 'running' then
      error('the host ended before its tasks ran: ' .. reg:read(id).stderr)
    end
    return pids ~= nil
  end, 'the host to start its tasks')
  local sessions = {}
  for _, p in ipairs(pids) do
    sessions[p] = true
  end
  local h = { reg = reg, id = id, mark = mark, leaders = pids, sessions = sessions, dir = dir }
  H.ok(#H.marked(mark) >= 7, 'the tasks run')
  -- The process that left its task's session (setsid).  The host counts
  -- it once it exists, which may be before it called setsid(): wait for
  -- the call, not just the process.
  H.wait_until(function()
    h.escaped = {}
    for _, p in ipairs(H.marked(mark)) do
      if not sessions[session_of(p) or -1] then
        h.escaped[#h.escaped + 1] = p
      end
    end
    return #h.escaped >= 1
  end, 'the setsid child to leave its session')
  H.eq(#h.escaped, 1, 'processes that left their session')
  local go = io.open(env.UVTL_HOST_OUT .. '.go', 'w')
  go:close()
  return h
end

local function host_end(h)
  local snap
  h.reg:wait(h.id, nil, function(_, s)
    snap = s
  end)
  H.wait_until(function()
    return snap ~= nil
  end, 'the host to end')
  return snap
end

local function done(h)
  kill_all(H.marked(h.mark))
  H.close(h.reg)
  os.execute('rm -rf ' .. h.dir)
end

-- Marked processes still in a task's session.
local function in_sessions(h)
  local n = {}
  for _, p in ipairs(H.marked(h.mark)) do
    if h.sessions[session_of(p) or -1] then
      n[#n + 1] = p
    end
  end
  return n
end

H.test('LU-3: :qa with live tasks stops every task before Neovim exits', function()
  local h = host('nvim', { UVTL_HOST_END = 'qa' })
  local snap = host_end(h)
  H.eq(snap.detail, 'exit code: 0')
  -- Quiet before exit: nothing of any task's session is left the moment
  -- Neovim is gone (the TERM-ignorers got SIGKILL at their grace).
  H.eq(#in_sessions(h), 0, 'processes left in the tasks sessions')
  -- What left its session with setsid is stopped too: the close's passes
  -- follow parent links out of the session (S-11), cgroups or not.
  H.eq(#H.marked(h.mark), 0, 'the setsid child')
  done(h)
end, { host = 'nvim' })

H.test('LU-3: without the exit hook (close_on_exit = false) :qa leaves the tasks running', function()
  local h = host('nvim', { UVTL_HOST_END = 'qa', UVTL_HOST_NOHOOK = '1' })
  host_end(h)
  H.ok(#in_sessions(h) >= 6, 'the tasks outlive Neovim without the hook')
  done(h)
end, { host = 'nvim' })

H.test('LU-3: :qa with the guardian leaves nothing, the setsid child too', function()
  local h = host('nvim', { UVTL_HOST_END = 'qa', UVTL_HOST_GUARDIAN = '1' })
  host_end(h)
  H.eq(#in_sessions(h), 0)
  H.wait_until(function()
    return #H.marked(h.mark) == 0
  end, 'the guardian to stop the setsid child')
  done(h)
end, { host = 'nvim' })

H.test('LU-3: a SIGTERM to Neovim (VimLeavePre runs) stops every task', function()
  local h = host('nvim', { UVTL_HOST_END = 'wait' })
  h.reg:signal(h.id, 'SIGTERM')
  host_end(h)
  H.eq(#in_sessions(h), 0)
  done(h)
end, { host = 'nvim' })

for _, kind in ipairs({ 'nvim', 'luajit' }) do
  H.test('LU-3: the guardian: a ' .. kind .. ' host killed with SIGKILL leaves nothing running', function()
    local h = host(kind, { UVTL_HOST_END = 'wait', UVTL_HOST_GUARDIAN = '1' })
    -- The host process alone, as an outside SIGKILL (the OOM killer, a
    -- user's kill -9): a signal through our registry would also reach
    -- the host's tasks, which descend from it (S-11).
    H.uv.kill(h.reg:pid(h.id), 'sigkill')
    local snap = host_end(h)
    H.eq(snap.detail, 'signal: SIGKILL')
    H.wait_until(function()
      return #H.marked(h.mark) == 0
    end, 'the guardian to stop every marked process')
    done(h)
  end)

  -- The fault the guardian fixes.
  H.test('LU-3: without the guardian a SIGKILLed ' .. kind .. ' host leaves its tasks running', function()
    local h = host(kind, { UVTL_HOST_END = 'wait' })
    -- The host process alone, as an outside SIGKILL (the OOM killer, a
    -- user's kill -9): a signal through our registry would also reach
    -- the host's tasks, which descend from it (S-11).
    H.uv.kill(h.reg:pid(h.id), 'sigkill')
    host_end(h)
    H.ok(#H.marked(h.mark) >= 7, 'the tasks outlive their host')
    done(h)
  end)
end

H.test('LU-3: a luajit script that ends with the registry open stops its tasks (lua_close)', function()
  local h = host('luajit', { UVTL_HOST_END = 'exit' })
  local snap = host_end(h)
  H.eq(snap.detail, 'exit code: 0')
  H.eq(#in_sessions(h), 0)
  done(h)
end)

-- Its sibling: the state closed from inside uv.run() (os.exit(0, true) in
-- a callback), where luv's own finaliser runs the loop after ours.
H.test('LU-3: os.exit(0, true) from a luv callback stops the tasks and exits cleanly (lua_close inside uv.run)', function()
  local h = host('luajit', { UVTL_HOST_END = 'exitcb' })
  local snap = host_end(h)
  H.eq(snap.detail, 'exit code: 0')
  H.eq(#in_sessions(h), 0)
  done(h)
end)
