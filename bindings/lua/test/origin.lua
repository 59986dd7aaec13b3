-- The origin's scenarios through the Lua API (LU-1, LU-2), as the Node
-- package ported them (bindings/node/test/origin.test.js): ids, fences,
-- consuming reads, waits whose deadline is not a failure, exactly-once
-- listeners with throwing ones.  Runs in luajit and in Neovim.  The
-- bounds on what is kept of ended tasks are bounds.lua's.
local H = require('harness')
local uvt = require('uvtasks')

local function fixture(opts)
  local reg = uvt.new(opts or {})
  local detach = reg:attach_surface('test')
  return reg, detach
end

-- A task that prints `first`, then waits for a line on its stdin pipe and
-- prints it: it ends only when the test says so (no timing involved).
local function gated(reg, extra)
  local o = { command = 'printf first; read -r line; printf "%s" "$line"', stdin = 'pipe' }
  for k, v in pairs(extra or {}) do
    o[k] = v
  end
  return reg:spawn(o)
end

local function wait_end(reg, id, caller)
  local snap
  reg:wait(id, nil, function(err, s)
    snap = s
  end, { caller = caller })
  H.wait_until(function()
    return snap ~= nil
  end, 'the end of ' .. id)
  return snap
end

H.test('LU-1: ids are <kind>-<n>, one counter per kind, never reused', function()
  local reg = fixture()
  local a = reg:spawn({ command = 'true' })
  local b = reg:spawn({ argv = { 'true' } })
  local c = reg:spawn({ command = 'true', kind = 'build' })
  H.eq(a, 'bash-1')
  H.eq(b, 'bash-2')
  H.eq(c, 'build-1')
  wait_end(reg, a)
  reg:forget(a)
  H.eq(reg:spawn({ command = 'true' }), 'bash-3')
  H.close(reg)
end)

H.test('LU-1: errors are Lua errors whose message starts with the code', function()
  local reg = uvt.new()
  H.raises('UVT_ENOSURFACE', reg.spawn, reg, { command = 'true' })
  local detach = reg:attach_surface('s')
  H.raises('UVT_ENOTASK', reg.get, reg, 'bash-99')
  H.raises('UVT_ENOTASK', reg.kill, reg, 'bash-99')
  H.raises('EINVAL', reg.spawn, reg, { command = 'true', argv = { 'true' } })
  H.raises('EINVAL', reg.spawn, reg, { command = 'true', tty = 'yes' })
  H.raises('EINVAL', reg.spawn, reg, { command = 'true', env = { ['A=B'] = 'x' } })
  H.raises('EINVAL', reg.spawn, reg, { command = 'true', stdin = 42 })
  H.raises('ENOENT', reg.spawn, reg, { argv = { 'no-such-program-uvtl' } })
  H.raises('ENOENT', reg.spawn, reg, { command = 'true', cwd = '/no/such/dir' })
  H.raises('EINVAL', reg.get, reg, 42)
  local ok, err = pcall(reg.get, reg, 'bash-99')
  H.ok(not ok and err:find("^UVT_ENOTASK: no task with that id, get 'bash%-99'"), err)
  -- R-SURF-1: the last detach refuses starts again; detach is idempotent.
  detach()
  detach()
  H.raises('UVT_ENOSURFACE', reg.spawn, reg, { command = 'true' })
  H.close(reg)
  -- A closed registry refuses everything with UVT_ECLOSING.
  H.raises('UVT_ECLOSING', reg.spawn, reg, { command = 'true' })
  H.raises('UVT_ECLOSING', reg.close, reg)
  detach() -- harmless after close
end)

H.test('LU-1: fences: another session gets UVT_EFOREIGN, list shows its own', function()
  local reg = fixture()
  local a = reg:register_agent('agent-a', 's1')
  local b = reg:register_agent('agent-b', 's2')
  H.eq(a.id, 'agent-a')
  H.eq(a.session, 's1')
  H.raises('EEXIST', reg.register_agent, reg, 'agent-a', 's3')
  local id = gated(reg, { owner = a })
  local open = reg:spawn({ command = 'true' }) -- unowned: open to all
  H.eq(reg:get(id, { caller = a }).owner_session, 's1')
  H.raises('UVT_EFOREIGN', reg.get, reg, id, { caller = b })
  H.raises('UVT_EFOREIGN', reg.get, reg, id) -- no caller never matches
  H.raises('UVT_EFOREIGN', reg.read, reg, id, { caller = b })
  H.raises('UVT_EFOREIGN', reg.kill, reg, id, { caller = b })
  H.raises('UVT_EFOREIGN', reg.write, reg, id, 'x\n', { caller = b })
  H.raises('UVT_EFOREIGN', reg.wait, reg, id, 1000, function() end, { caller = b })
  H.raises('EINVAL', reg.get, reg, id, { caller = 'agent-a' })
  local la, lb = reg:list({ caller = a }), reg:list({ caller = b })
  H.eq(#la, 2)
  H.eq(la[1].id, id)
  H.eq(la[2].id, open)
  H.eq(#lb, 1)
  H.eq(lb[1].id, open)
  H.eq(#reg:list(), 1)
  reg:write(id, 'done\n', { caller = a })
  H.eq(wait_end(reg, id, a).status, 'completed')
  -- R-OWN-1: a disposed agent is no owner any more.
  local disposed = false
  a:dispose(function(agent)
    disposed = agent == a
  end)
  H.wait_until(function()
    return disposed
  end, 'the dispose callback')
  H.raises('UVT_ENOTASK', reg.get, reg, id, { caller = a })
  H.raises('UVT_ESTALE', reg.spawn, reg, { command = 'true', owner = a })
  H.close(reg)
end)

H.test('LU-1: reads consume what they return; an ended task reads as reported', function()
  local reg = fixture()
  local id = gated(reg)
  H.wait_until(function()
    return reg:get(id) ~= nil and reg:pid(id) ~= nil
  end, 'the spawn')
  local got = ''
  H.wait_until(function()
    got = got .. reg:read(id).stdout
    return got == 'first'
  end, 'the first output')
  local r = reg:read(id)
  H.eq(r.stdout, '')
  H.eq(r.status, 'running')
  H.eq(reg:get(id).reported, false)
  reg:write(id, 'second\n')
  local snap = wait_end(reg, id)
  H.eq(snap.status, 'completed')
  H.eq(snap.detail, 'exit code: 0')
  H.eq(snap.exit_code, 0)
  r = reg:read(id)
  H.eq(r.stdout, 'second')
  H.eq(r.exit_code, 0)
  H.eq(r.snapshot.reported, true)
  H.eq(reg:read(id).stdout, '')
  -- stderr apart (P-RES-1), bytes as written (any bytes).
  local e = reg:spawn({ command = 'printf "o\\0ut"; printf err >&2; exit 3' })
  snap = wait_end(reg, e)
  H.eq(snap.detail, 'exit code: 3')
  r = reg:read(e)
  H.eq(r.stdout, 'o\0ut')
  H.eq(r.stderr, 'err')
  H.eq(r.exit_code, 3)
  H.close(reg)
end)

H.test('LU-1: a wait whose deadline passes gives UVT_EWAITTIMEOUT and the running snapshot', function()
  local reg = fixture()
  local id = gated(reg)
  local got
  local w = reg:wait(id, 20, function(err, snap)
    got = { err = err, snap = snap }
  end)
  H.eq(got, nil) -- never inside the call (R-WAIT-2)
  H.wait_until(function()
    return got ~= nil
  end, 'the deadline')
  H.ok(got.err:find('^UVT_EWAITTIMEOUT:'), got.err)
  H.eq(got.snap.status, 'running') -- not a failure of the task
  H.eq(got.snap.reported, false)
  H.eq(w:pending(), false)
  H.eq(reg:get(id).status, 'running')
  -- R-WAIT-1: the id first, then the timeout.
  H.raises('UVT_ENOTASK', reg.wait, reg, 'bash-99', 0, function() end)
  for _, t in ipairs({ 0, -1, 0 / 0 }) do
    H.raises('EINVAL', reg.wait, reg, id, t, function() end)
  end
  H.raises('EINVAL', reg.wait, reg, id, '10', function() end)
  -- R-WAIT-5: an abort gives UVT_EABORTED and no snapshot.
  local aborted
  local w2 = reg:wait(id, nil, function(err, snap)
    aborted = { err = err, snap = snap }
  end)
  H.eq(w2:abort(), true)
  H.wait_until(function()
    return aborted ~= nil
  end, 'the abort')
  H.ok(aborted.err:find('^UVT_EABORTED:'), aborted.err)
  H.eq(aborted.snap, nil)
  H.eq(w2:abort(), false)
  -- A wait with no deadline ends with the task: err nil, terminal snapshot.
  reg:write(id, 'x\n')
  local snap = wait_end(reg, id)
  H.eq(snap.status, 'completed')
  H.eq(snap.reported, true)
  H.close(reg)
end)

H.test('LU-1: await: the form for a coroutine, deadline and end alike', function()
  local reg = fixture()
  local id = gated(reg)
  local steps = {}
  local co = coroutine.create(function()
    local snap, err = reg:await(id, 20)
    steps[#steps + 1] = { snap = snap, err = err }
    reg:write(id, 'go\n')
    snap, err = reg:await(id, 600000)
    steps[#steps + 1] = { snap = snap, err = err }
  end)
  assert(coroutine.resume(co))
  H.eq(coroutine.status(co), 'suspended')
  H.wait_until(function()
    return coroutine.status(co) == 'dead'
  end, 'the coroutine')
  H.ok(steps[1].err:find('^UVT_EWAITTIMEOUT:'), steps[1].err)
  H.eq(steps[1].snap.status, 'running')
  H.eq(steps[2].err, nil)
  H.eq(steps[2].snap.status, 'completed')
  -- Outside a coroutine it is refused, not a hang.
  H.raises('EINVAL', reg.await, reg, id, 10)
  H.close(reg)
end)

H.test('LU-2: on_task_done: exactly once per task, in order; throwing listeners are logged and contained', function()
  local reg = fixture()
  local seen = {}
  reg:on_task_done(function()
    error('listener one broke')
  end)
  reg:on_task_done(function(s)
    seen[#seen + 1] = 'two ' .. s.id
  end)
  reg:on_task_done(function()
    error({ 'a table, not a string' })
  end)
  local last
  reg:on_task_done(function(s)
    seen[#seen + 1] = 'four ' .. s.id
    last = s.id
  end)
  local id1 = gated(reg)
  local id2 = gated(reg)
  reg:write(id1, 'a\n')
  H.wait_until(function()
    return last == id1
  end, 'the first end')
  reg:write(id2, 'b\n')
  H.wait_until(function()
    return last == id2
  end, 'the second end')
  -- A wait after the fact, a read, a kill of the ended task: no second notice.
  wait_end(reg, id1)
  reg:read(id1)
  H.eq(reg:kill(id1), 'already-terminal')
  H.eq(table.concat(seen, ','), table.concat({ 'two ' .. id1, 'four ' .. id1, 'two ' .. id2, 'four ' .. id2 }, ','))
  -- The errors reach the host's log (Neovim: an error message; luv:
  -- stderr), naming uvtasks, the listener and the task.
  H.wait_until(function()
    local m = H.messages()
    local _, n = m:gsub('uvtasks: an on_task_done listener %(task bash%-%d%) threw', '')
    return n >= 4
  end, 'the four errors logged')
  H.ok(H.messages():find('listener one broke', 1, true))
  H.ok(H.messages():find('error object is a table value', 1, true))
  H.close(reg)
end)

H.test('LU-1: a listener gets the owner agent; unsubscribe stops it; it may stop itself', function()
  local reg = fixture()
  local a = reg:register_agent('owner', 'sess')
  local owners, calls, self_stop = {}, 0, 0
  local off
  off = reg:on_task_done(function(s, owner)
    owners[#owners + 1] = owner
  end)
  local stop_me
  stop_me = reg:on_task_done(function()
    self_stop = self_stop + 1
    stop_me()
  end)
  local counted = reg:on_task_done(function()
    calls = calls + 1
  end)
  local id = reg:spawn({ command = 'true', owner = a })
  wait_end(reg, id, a)
  H.eq(owners[1], a)
  off()
  off() -- idempotent
  local id2 = reg:spawn({ command = 'true' })
  wait_end(reg, id2)
  H.eq(#owners, 1)
  H.eq(self_stop, 1)
  H.eq(calls, 2)
  counted()
  H.close(reg)
end)

H.test('LU-2: a throwing wait callback and on_data are contained too', function()
  local reg = fixture()
  local id = reg:spawn({
    command = 'echo data',
    on_data = function()
      error('on_data broke')
    end,
  })
  local second = false
  reg:wait(id, nil, function()
    error('wait callback broke')
  end)
  reg:wait(id, nil, function()
    second = true
  end)
  H.wait_until(function()
    return second
  end, 'the second wait')
  H.wait_until(function()
    local m = H.messages()
    return m:find('on_data broke', 1, true) and m:find('wait callback broke', 1, true)
  end, 'both errors logged')
  H.close(reg)
end)

H.test('LU-1: forget drops an ended record; a live one is EBUSY', function()
  local reg = fixture()
  local id = gated(reg)
  H.raises('EBUSY', reg.forget, reg, id)
  reg:write(id, 'x\n')
  wait_end(reg, id)
  reg:forget(id)
  H.raises('UVT_ENOTASK', reg.get, reg, id)
  H.close(reg)
end)
