-- Closing (LU-1, R-CLOSE-1..3) through the Lua API: with live tasks, from
-- inside callbacks, a registry nobody references, and loop hygiene (the
-- loop holds nothing of ours after the close callback).  Runs in luajit
-- and in Neovim.
local H = require('harness')
local uvt = require('uvtasks')

local function fixture(opts)
  local reg = uvt.new(opts or {})
  reg:attach_surface('test')
  return reg
end

H.test('LU-1: close with live tasks stops each one, then calls back; nothing of ours is left on the loop', function()
  -- The host's own handles first settle (Neovim's vim.wait keeps a timer).
  H.close(fixture())
  local before = uvt._loop_handles()
  local reg = fixture()
  local mark = H.mark('close')
  local name, value = mark:match('^([^=]+)=(.*)$')
  local ids = {}
  for i = 1, 3 do
    ids[i] = reg:spawn({ command = "trap '' TERM; sleep 300", env = { [name] = value }, grace_ms = 100 })
  end
  local a = reg:register_agent('a', 's')
  local owned = reg:spawn({ command = 'sleep 300', owner = a })
  local ends, waits = {}, {}
  reg:on_task_done(function(s)
    ends[#ends + 1] = s.id -- no listener runs once close began (R-CLOSE-1)
  end)
  for i, id in ipairs(ids) do
    reg:wait(id, nil, function(err, s)
      waits[i] = s and s.status or err
    end)
  end
  H.wait_until(function()
    return #H.marked(mark) >= 3
  end, 'the tasks to run')
  local closed = false
  reg:close(function()
    closed = true
  end)
  H.eq(closed, false) -- never inside the call
  H.raises('UVT_ECLOSING', reg.spawn, reg, { command = 'true' })
  H.wait_until(function()
    return closed
  end, 'the close callback')
  H.eq(#H.marked(mark), 0, 'task processes left')
  H.eq(#ends, 0)
  for i = 1, 3 do
    H.eq(waits[i], 'killed') -- pending waits get their terminal snapshots
  end
  H.raises('UVT_ECLOSING', reg.get, reg, owned)
  -- R-CLOSE-2: nothing of ours is on the loop (handles are counted in C:
  -- Neovim's own handles make luv's walk abort).
  H.eq(uvt._loop_handles(), before, 'handles on the loop')
  if not H.nvim then
    local n = 0
    H.uv.walk(function()
      n = n + 1
    end)
    H.eq(n, 0, 'uv.walk')
  end
  -- A disposed-after-close agent calls back and touches nothing freed.
  local disposed = false
  a:dispose(function()
    disposed = true
  end)
  H.wait_until(function()
    return disposed
  end, 'the late dispose')
end)

H.test('LU-1: close from inside a listener, a wait callback and on_data', function()
  for _, where in ipairs({ 'listener', 'wait', 'on_data' }) do
    local reg = fixture()
    local closed = false
    local function close_now()
      reg:close(function()
        closed = true
      end)
    end
    local other = reg:spawn({ command = 'sleep 300', grace_ms = 100 })
    local opts = { command = 'echo hi' }
    if where == 'on_data' then
      opts.on_data = close_now
    end
    local id = reg:spawn(opts)
    if where == 'listener' then
      reg:on_task_done(close_now)
    elseif where == 'wait' then
      reg:wait(id, nil, close_now)
    end
    H.wait_until(function()
      return closed
    end, 'the close from ' .. where)
    H.raises('UVT_ECLOSING', reg.get, reg, other)
  end
end)

H.test('LU-1: an open registry nobody references is not collected: its tasks run and report', function()
  local done = nil
  do
    local reg = fixture()
    local id = reg:spawn({ command = 'read -r x; echo "$x"', stdin = 'pipe' })
    reg:on_task_done(function(s)
      done = s.status
      reg:close()
    end)
    _G.__uvtl_write = function()
      reg:write(id, 'x\n')
    end
  end
  collectgarbage('collect')
  collectgarbage('collect')
  _G.__uvtl_write()
  _G.__uvtl_write = nil
  collectgarbage('collect')
  H.wait_until(function()
    return done ~= nil
  end, 'the task of an unreferenced registry')
  H.eq(done, 'completed')
  H.wait_until(function()
    return uvt._open() == 0
  end, 'the registry to close')
end)

H.test('LU-1: functions held by a registry are let go at close', function()
  local weak = setmetatable({}, { __mode = 'k' })
  local reg = fixture()
  local f = function() end
  weak[f] = true
  reg:on_task_done(f)
  local id = reg:spawn({ command = 'sleep 300', on_data = f })
  reg:wait(id, nil, f)
  f = nil
  collectgarbage('collect')
  H.ok(next(weak) ~= nil, 'held while open')
  H.close(reg)
  collectgarbage('collect')
  collectgarbage('collect')
  H.eq(next(weak), nil, 'let go after close')
end)
