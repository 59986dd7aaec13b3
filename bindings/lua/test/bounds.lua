-- What a registry keeps of ended tasks (LU-1: keep_finished and
-- max_unread_bytes are the Node package's bounds, N-11, with its defaults
-- and its rule).  Every ended task counts, whether or not anyone read it
-- or heard of its end: while it holds output nobody has read, against
-- max_unread_bytes (its bytes, and at least 4 KiB for the record); once
-- nothing of it is left to read, against keep_finished.  A host's own
-- wait (or await, or listener) reads nothing, so it never makes output
-- forgettable.  Runs in luajit and in Neovim.
local H = require('harness')
local uvt = require('uvtasks')

local function fixture(opts)
  local reg = uvt.new(opts or {})
  reg:attach_surface('test')
  return reg
end

-- The loop turned twice: the sweep that follows an end (a check handle,
-- after the dispatch) has run.  Waits for two timer callbacks, no time.
local function turn()
  for _ = 1, 2 do
    local fired = false
    local t = H.uv.new_timer()
    t:start(0, 0, function()
      fired = true
      t:close()
    end)
    H.wait_until(function()
      return fired
    end, 'a loop turn')
  end
end

-- `n` tasks of `command`, `batch` at a time, each waited for (a host's
-- own wait: the end reported, the output not read); `read` reads each.
local function waited(reg, n, command, batch, opts)
  opts = opts or {}
  local ids = {}
  local i = 0
  while i < n do
    local some, ended = {}, 0
    for _ = 1, math.min(batch or 25, n - i) do
      local o = { command = command, owner = opts.owner }
      some[#some + 1] = reg:spawn(o)
    end
    for _, id in ipairs(some) do
      reg:wait(id, nil, function()
        ended = ended + 1
      end, { caller = opts.owner })
    end
    H.wait_until(function()
      return ended == #some
    end, 'a batch of tasks to end')
    for _, id in ipairs(some) do
      if opts.read then
        reg:read(id, { caller = opts.owner })
      end
      ids[#ids + 1] = id
    end
    i = i + #some
  end
  turn()
  return ids
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

local function ids_of(list)
  local out = {}
  for i, s in ipairs(list) do
    out[i] = s.id
  end
  table.sort(out, function(a, b)
    return tonumber(a:match('%d+$')) < tonumber(b:match('%d+$'))
  end)
  return table.concat(out, ' ')
end

local function last(ids, n)
  local out = {}
  for i = #ids - n + 1, #ids do
    out[#out + 1] = ids[i]
  end
  return table.concat(out, ' ')
end

-- The F1 probe (issue 35's, through the Lua API), and its siblings: what
-- the 101 later tasks were (no output, output waited for but not read,
-- output read) must not matter.
for _, case in ipairs({
  { 'no output', 'true', false },
  { 'output waited for, never read', 'echo other-output', false },
  { 'output read', 'echo other-output', true },
}) do
  H.test('LU-1 (N-11) F1: a wait does not make unread output forgettable (101 later tasks: ' .. case[1] .. ')', function()
    local reg = fixture()
    local bg = reg:spawn({ command = 'echo important-output' })
    H.eq(wait_end(reg, bg).reported, true, 'the end was reported')
    waited(reg, 101, case[2], 1, { read = case[3] })
    H.eq(reg:read(bg).stdout, 'important-output\n', 'the unread output')
    -- Read now: nothing of it is left to read, and it counts against
    -- keep_finished (100) like any spent task.
    waited(reg, 101, 'true', 25)
    local err = H.raises('UVT_ENOTASK', reg.get, reg, bg)
    H.ok(err:find('(forgotten: keep_finished: nothing of it was left to read)', 1, true), err)
    H.close(reg)
  end)
end

-- The other ways a host hears of an end: a coroutine's await, a
-- listener.  Neither reads.
H.test('LU-1 (N-11) F1: await and on_task_done do not make unread output forgettable either', function()
  local reg = fixture()
  local heard = {}
  reg:on_task_done(function(snap)
    heard[snap.id] = true
  end)
  local awaited = reg:spawn({ command = 'echo awaited-output' })
  local listened = reg:spawn({ command = 'echo listened-output' })
  local snap
  coroutine.wrap(function()
    snap = reg:await(awaited)
  end)()
  H.wait_until(function()
    return snap ~= nil and heard[listened]
  end, 'both ends')
  waited(reg, 150, 'true', 25)
  H.eq(reg:read(awaited).stdout, 'awaited-output\n', 'awaited')
  H.eq(reg:read(listened).stdout, 'listened-output\n', 'listened')
  H.close(reg)
end)

-- get and list only look; read reads.
H.test('LU-1 (N-11): get and list read nothing; read does', function()
  local reg = fixture({ keep_finished = 2 })
  local looked = reg:spawn({ command = 'echo looked-at' })
  local read = reg:spawn({ command = 'echo read-it' })
  wait_end(reg, looked)
  wait_end(reg, read)
  reg:get(looked)
  reg:list()
  H.eq(reg:read(read).stdout, 'read-it\n')
  waited(reg, 3, 'true', 1)
  H.eq(reg:read(looked).stdout, 'looked-at\n', 'looked at, never read: kept')
  H.raises('UVT_ENOTASK', reg.get, reg, read)
  H.close(reg)
end)

-- F2: a host that only listens, and one that never hears of an end.
H.test('LU-1 (N-11) F2: a host that only listens stays bounded (1,000 tasks of 100 kB)', function()
  local reg = fixture()
  local done = 0
  reg:on_task_done(function()
    done = done + 1
  end)
  for i = 1, 1000, 25 do
    for _ = 1, 25 do
      reg:spawn({ command = 'head -c 100000 /dev/zero' })
    end
    H.wait_until(function()
      return done == i + 24
    end, 'a batch of ends')
  end
  turn()
  local m = reg:metrics()
  -- 16 MiB of unread output: 167 tasks of 100 kB.
  H.ok(m.records <= 168, 'records ' .. m.records)
  H.ok(m.records >= 150, 'records ' .. m.records .. ': the newest are kept')
  H.eq(m.forgotten, 1000 - m.records, 'forgotten')
  H.eq(m.forgotten_unread, m.forgotten, 'forgotten_unread')
  H.eq(m.unread_bytes_dropped, m.forgotten * 100000, 'unread_bytes_dropped')
  H.close(reg)
end)

H.test('LU-1 (N-11) F2: a host that never hears of an end stays bounded too (keep_finished)', function()
  local reg = fixture({ keep_finished = 10 })
  local ids = {}
  -- Six batches, each over before the next starts (so "oldest" is known):
  -- nobody waits, reads or listens; the registry's own count of live
  -- tasks says when a batch is over.
  for _ = 1, 6 do
    for _ = 1, 10 do
      ids[#ids + 1] = reg:spawn({ command = 'true' })
    end
    H.wait_until(function()
      return reg:metrics().live == 0
    end, 'a batch to end')
  end
  turn()
  H.eq(ids_of(reg:list()), last(ids, 10), 'the newest ten are kept')
  H.eq(reg:metrics().forgotten, 50, 'forgotten')
  H.close(reg)
end)

H.test('LU-1 (N-11): tasks with a little unread output each are bounded (4 KiB a record)', function()
  -- 64 KiB at 4 KiB a record: 16 records of unread output at most.
  local reg = fixture({ max_unread_bytes = 64 * 1024 })
  local ids = waited(reg, 40, 'echo x', 1)
  H.eq(ids_of(reg:list()), last(ids, 16), 'the newest 16')
  H.close(reg)
end)

-- How a host learns of a drop: metrics, and the error of a later look,
-- whose message names the bound and the bytes lost.
H.test('LU-1 (N-11): a drop shows in metrics and in the error of a later look', function()
  local reg = fixture({ keep_finished = 1, max_unread_bytes = 100000 })
  local big = reg:spawn({ command = 'head -c 80000 /dev/zero' })
  wait_end(reg, big)
  local big2 = reg:spawn({ command = 'head -c 80000 /dev/zero' })
  wait_end(reg, big2)
  H.wait_until(function()
    return reg:metrics().forgotten == 1
  end, 'the drop')
  local m = reg:metrics()
  H.eq(m.forgotten_unread, 1, 'forgotten_unread')
  H.eq(m.unread_bytes_dropped, 80000, 'unread_bytes_dropped')
  local why = ' (forgotten: max_unread_bytes: 80000 bytes never read were dropped)'
  for _, call in ipairs({
    { 'read', reg.read },
    { 'get', reg.get },
    { 'kill', reg.kill },
    { 'forget', reg.forget },
    { 'signal', function(r, id) return r:signal(id, 'SIGINT') end },
    { 'wait', function(r, id) return r:wait(id, nil, function() end) end },
  }) do
    local err = H.raises('UVT_ENOTASK', call[2], reg, big)
    H.ok(err:sub(-#why) == why, call[1] .. ': ' .. err)
  end
  -- Read, then pushed out by the count: no output was lost.
  H.eq(#reg:read(big2).stdout, 80000)
  waited(reg, 2, 'true', 1)
  local err = H.raises('UVT_ENOTASK', reg.get, reg, big2)
  H.ok(err:find("get 'bash-2' (forgotten: keep_finished: nothing of it was left to read)", 1, true), err)
  H.eq(reg:metrics().forgotten_unread, 1, 'forgotten_unread')
  -- An id never seen says nothing of the kind.
  err = H.raises('UVT_ENOTASK', reg.get, reg, 'bash-999999')
  H.ok(not err:find('forgotten', 1, true), err)
  H.close(reg)
end)

-- Leftovers are kept (P-LEFT-1), whatever the bound, and count once gone.
H.test('LU-1 (N-11): a task that left processes running is never forgotten; kill lets it go', function()
  local reg = fixture({ keep_finished = 2 })
  local left = reg:spawn({ command = 'sleep 60 >/dev/null 2>&1 & echo bye' })
  H.eq(wait_end(reg, left).leftovers, 1, 'leftovers at the end')
  waited(reg, 6, 'true', 1)
  H.eq(reg:get(left).leftovers, 1, 'kept while its session has processes')
  reg:kill(left)
  H.wait_until(function()
    return reg:get(left).leftovers == 0
  end, 'the session to be empty')
  H.eq(reg:read(left).stdout, 'bye\n')
  waited(reg, 6, 'true', 1)
  H.raises('UVT_ENOTASK', reg.get, reg, left)
  H.close(reg)
end)

-- on_data hosts: the module was the reader, so nothing is unread.
H.test('LU-1 (N-11): on_data tasks are spent at their end (keep_finished)', function()
  local reg = fixture({ keep_finished = 3, max_unread_bytes = 1 })
  local bytes, ids = 0, {}
  for i = 1, 8 do
    ids[i] = reg:spawn({
      command = 'head -c 50000 /dev/zero',
      on_data = function(chunk)
        bytes = bytes + #chunk
      end,
    })
    wait_end(reg, ids[i])
  end
  turn()
  H.eq(bytes, 8 * 50000, 'every byte handed over')
  local m = reg:metrics()
  H.eq(m.forgotten_unread, 0, 'forgotten_unread')
  H.eq(m.unread_bytes_dropped, 0, 'unread_bytes_dropped')
  H.ok(m.records <= 3, 'records ' .. m.records)
  H.close(reg)
end)

-- forget and an agent's disposal take their tasks out of the count.
H.test('LU-1 (N-11): forget and agent disposal take their tasks out of the count', function()
  local reg = fixture({ keep_finished = 3 })
  local agent = reg:register_agent('a', 's')
  local ids = waited(reg, 6, 'true', 1, { owner = agent })
  H.eq(ids_of(reg:list({ caller = agent })), last(ids, 3), 'the newest three')
  reg:forget(ids[6], { caller = agent })
  local disposed = false
  agent:dispose(function()
    disposed = true
  end)
  H.wait_until(function()
    return disposed
  end, 'the disposal')
  H.eq(reg:metrics().records, 0, 'records')
  -- What was counted for them is gone with them: three new ones all stay.
  local more = waited(reg, 3, 'true', 1)
  H.eq(ids_of(reg:list()), table.concat(more, ' '), 'the new three')
  H.close(reg)
end)

H.test('LU-1 (N-11): the bounds are integers >= 0 or math.huge; math.huge for both keeps all', function()
  H.raises('EINVAL', uvt.new, { keep_finished = -1 })
  H.raises('EINVAL', uvt.new, { keep_finished = 'x' })
  H.raises('EINVAL', uvt.new, { max_unread_bytes = 1.5 })
  local reg = fixture({ keep_finished = math.huge, max_unread_bytes = math.huge })
  local ids = waited(reg, 12, 'echo kept', 4)
  H.eq(ids_of(reg:list()), table.concat(ids, ' '), 'all kept')
  H.eq(reg:metrics().forgotten, 0, 'forgotten')
  H.close(reg)
end)
