-- Process tasks through the Lua API (LU-1): session kills of a
-- TERM-ignoring tree and a setsid child, a REPL on a terminal, stdin,
-- on_data, signals, the runtime limit.  Runs in luajit and in Neovim.
local H = require('harness')
local uvt = require('uvtasks')

local function fixture(opts)
  local reg = uvt.new(opts or {})
  reg:attach_surface('test')
  return reg
end

local function wait_end(reg, id)
  local snap
  reg:wait(id, nil, function(_, s)
    snap = s
  end)
  H.wait_until(function()
    return snap ~= nil
  end, 'the end of ' .. id)
  return snap
end

local function session_of(pid)
  local s = H.read_file('/proc/' .. pid .. '/stat')
  if s == nil then
    return nil
  end
  local fields = {}
  for w in s:match('%) (.*)$'):gmatch('%S+') do
    fields[#fields + 1] = w
  end
  return tonumber(fields[4])
end

-- A tree that ignores SIGTERM: the shell, a subshell and two sleeps; and
-- a child that left the session with setsid.
local TREE = "trap '' TERM; (trap '' TERM; sleep 300) & setsid sleep 300 & sleep 300 & echo ready; wait"

local function start_tree(reg, mark)
  local name, value = mark:match('^([^=]+)=(.*)$')
  local id = reg:spawn({ command = TREE, env = { [name] = value }, grace_ms = 100 })
  local out = ''
  H.wait_until(function()
    out = out .. reg:read(id).stdout
    return out:find('ready', 1, true) ~= nil and #H.marked(mark) >= 4
  end, 'the tree to start')
  return id
end

H.test('LU-1: a kill stops a TERM-ignoring tree: SIGTERM, then SIGKILL at the grace', function()
  local reg = fixture()
  local mark = H.mark('tree')
  local id = start_tree(reg, mark)
  local leader = reg:pid(id)
  H.eq(reg:kill(id, { reason = 'test' }), 'requested')
  H.eq(reg:get(id).status, 'stopping')
  local snap = wait_end(reg, id)
  H.eq(snap.status, 'killed')
  H.eq(snap.detail, 'signal: SIGKILL')
  H.eq(snap.kill_reason, 'test')
  -- Nothing is left, the setsid child included: a kill's passes follow
  -- parent links out of the session while the leader lives (S-11), so a
  -- child that called setsid() is still the task's without cgroups.
  H.eq(#H.marked(mark), 0, 'survivors')
  H.close(reg)
end)

H.test('LU-1: with cgroups, the setsid child dies with its task too', function()
  local ok, reg = pcall(uvt.new, { cgroups = true })
  if not ok then
    -- No delegated cgroup v2 tree here: the option says why.
    H.ok(tostring(reg):match('^E'), reg)
    io.stdout:write('# cgroups unavailable here: ' .. tostring(reg) .. '\n')
    return
  end
  reg:attach_surface('test')
  local mark = H.mark('cgtree')
  local id = start_tree(reg, mark)
  reg:kill(id)
  H.eq(wait_end(reg, id).status, 'killed')
  H.eq(#H.marked(mark), 0, 'survivors')
  H.close(reg)
end)

H.test('LU-1: a REPL on a terminal: prompt, input, resize, end of file', function()
  local reg = fixture()
  local screen = ''
  local id = reg:spawn({
    argv = { 'python3', '-q', '-i' },
    tty = true,
    cols = 100,
    rows = 30,
    -- (LD_PRELOAD: the ASan lane preloads its runtime into the host only.)
    env = { PYTHONSTARTUP = '', LD_PRELOAD = '' },
    on_data = function(chunk, stream)
      if stream ~= 'stdout' then
        screen = screen .. '<stderr?>' -- a terminal is one stream
      end
      screen = screen .. chunk
    end,
  })
  local function prompt()
    H.wait_until(function()
      return screen:sub(-4) == '>>> '
    end, 'the prompt')
  end
  prompt()
  screen = ''
  reg:write(id, '6 * 7\r')
  prompt()
  H.ok(screen:find('42\r\n', 1, true), screen)
  screen = ''
  reg:write(id, 'import shutil; shutil.get_terminal_size().columns\r')
  prompt()
  H.ok(screen:find('100', 1, true), screen)
  reg:resize(id, 120, 40)
  screen = ''
  reg:write(id, 'shutil.get_terminal_size().columns\r')
  -- The answer, then the prompt: readline may redraw its prompt on the
  -- resize's SIGWINCH first, so a prompt alone is not the answer's end.
  H.wait_until(function()
    return screen:find('120', 1, true) ~= nil and screen:sub(-4) == '>>> '
  end, 'the new width and the prompt')
  reg:close_stdin(id) -- Ctrl-D at the prompt
  local snap = wait_end(reg, id)
  H.eq(snap.detail, 'exit code: 0')
  H.close(reg)
end)

H.test('LU-1: on a terminal, Ctrl-C interrupts the foreground job', function()
  local reg = fixture()
  local screen = ''
  local id = reg:spawn({
    command = 'echo ready; exec cat',
    tty = true,
    on_data = function(chunk)
      screen = screen .. chunk
    end,
  })
  H.wait_until(function()
    return screen:find('ready', 1, true) ~= nil
  end, 'ready')
  reg:write(id, 'echoed\r')
  H.wait_until(function()
    return select(2, screen:gsub('echoed', '')) >= 2 -- the echo, then cat's copy
  end, 'cat to copy a line')
  reg:write(id, '\3')
  local snap = wait_end(reg, id)
  H.eq(snap.detail, 'signal: SIGINT')
  H.close(reg)
end)

H.test('LU-1: stdin: a string then end of file; a pipe with write and close_stdin', function()
  local reg = fixture()
  local a = reg:spawn({ argv = { 'sort' }, stdin = 'pear\nfig\napple\n' })
  wait_end(reg, a)
  H.eq(reg:read(a).stdout, 'apple\nfig\npear\n')
  local b = reg:spawn({ argv = { 'cat' }, stdin = 'pipe' })
  reg:write(b, 'one\n')
  reg:write(b, 'two\0three\n')
  reg:close_stdin(b)
  wait_end(reg, b)
  H.eq(reg:read(b).stdout, 'one\ntwo\0three\n')
  H.raises('EPIPE', reg.write, reg, b, 'late')
  local c = reg:spawn({ command = 'cat' }) -- no pipe: stdin is /dev/null, EOF at once
  H.eq(wait_end(reg, c).detail, 'exit code: 0')
  H.raises('EINVAL', reg.write, reg, c, 'x')
  H.close(reg)
end)

H.test('LU-1: on_data hands over every byte, per stream, before the end is told', function()
  local reg = fixture()
  local got = { stdout = {}, stderr = {} }
  local ended_with = nil
  local bad = 0
  local big = 200 * 1024
  local id = reg:spawn({
    command = 'head -c ' .. big .. ' /dev/zero; printf err >&2',
    on_data = function(chunk, stream, tid)
      -- Recorded, not asserted: a callback's error is contained.
      if #chunk > 64 * 1024 or ended_with ~= nil or tid ~= 'bash-1' then
        bad = bad + 1
      end
      got[stream][#got[stream] + 1] = chunk
    end,
  })
  reg:on_task_done(function(s)
    ended_with = s.status
  end)
  wait_end(reg, id)
  H.eq(#table.concat(got.stdout), big)
  H.eq(table.concat(got.stderr), 'err')
  H.eq(bad, 0, 'chunks over 64 KiB, after the end, or of another id')
  H.ok(#got.stdout >= 4, 'the output came in chunks')
  -- on_data was the reader: nothing is left for read().
  H.eq(reg:read(id).stdout, '')
  H.close(reg)
end)

H.test('LU-1: signal sends one signal to the session; timeout_ms stops a task like a kill', function()
  local reg = fixture()
  local id = reg:spawn({ command = 'trap "echo got-usr1" USR1; echo ready; while :; do sleep 0.05; done' })
  local out = ''
  -- Output can come before the spawner thread's answer: signal needs the
  -- pid (EAGAIN until then, P-SPAWN-6), so wait for both.
  H.wait_until(function()
    out = out .. reg:read(id).stdout
    return out:find('ready', 1, true) ~= nil and reg:pid(id) ~= nil
  end, 'ready')
  reg:signal(id, 'SIGUSR1')
  H.wait_until(function()
    out = out .. reg:read(id).stdout
    return out:find('got-usr1', 1, true) ~= nil
  end, 'the trap')
  H.eq(reg:get(id).status, 'running')
  H.raises('EINVAL', reg.signal, reg, id, 'SIGNOPE')
  reg:signal(id, 'SIGINT')
  local snap = wait_end(reg, id)
  H.eq(snap.detail, 'signal: SIGINT')
  H.eq(snap.signal, 'SIGINT')
  H.raises('ESRCH', reg.signal, reg, id, 'SIGINT')
  local t = reg:spawn({ command = 'sleep 300', timeout_ms = 50, grace_ms = 100 })
  snap = wait_end(reg, t)
  H.eq(snap.status, 'killed')
  H.ok(snap.detail:find('^timed out after %d+ ms'), snap.detail)
  H.close(reg)
end)
