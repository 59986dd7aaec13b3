-- The Lua module's test harness (LU-4): the same test files run under
-- `luajit` with luv and under `nvim --headless`, each a meson test that
-- prints TAP.  A test waits for the condition it needs by running the
-- host's loop (uv.run('once') in luajit, vim.wait in Neovim), never for a
-- time; the limit of a wait only stops a hung test.
--
-- Usage: UVTL_TEST=<file> luajit harness.lua
--        UVTL_TEST=<file> nvim --headless -u NONE -i NONE -n -c 'luafile harness.lua'
local H = {}

H.nvim = type(vim) == 'table' and type(vim.api) == 'table'
if H.nvim then
  H.uv = vim.uv or vim.loop
else
  H.uv = require('luv')
end
H.host = H.nvim and 'nvim' or 'luajit'
H.dir = (os.getenv('UVTL_TEST_DIR') or '.')
-- Paths to the test's helper scripts and to the module's build dir.
H.build = os.getenv('UVTL_BUILD') or '.'

local uv = H.uv
-- A hung test ends at this limit (ms) with a failure; waits never need it.
local LIMIT = tonumber(os.getenv('UVTL_LIMIT_MS') or '') or 300000

-- Runs the loop until pred() is true; fails the test if the limit passes.
function H.wait_until(pred, what)
  if pred() then
    return
  end
  if H.nvim then
    if not vim.wait(LIMIT, pred, 2) then
      error('gave up waiting for ' .. (what or 'a condition'), 2)
    end
    return
  end
  -- As vim.wait does: the condition is looked at every 2 ms as well as
  -- after each event (a file another process writes makes no event here).
  local expired = false
  local started = uv.now()
  local poll = uv.new_timer()
  poll:start(2, 2, function()
    uv.update_time()
    expired = uv.now() - started > LIMIT
  end)
  while not pred() and not expired do
    uv.run('once')
  end
  poll:close()
  uv.run('nowait')
  if expired then
    error('gave up waiting for ' .. (what or 'a condition'), 2)
  end
end

-- Runs the loop until `reg` is closed (its close callback ran).
function H.close(reg)
  local closed = false
  reg:close(function()
    closed = true
  end)
  H.wait_until(function()
    return closed
  end, 'the registry to close')
end

-- Captures what the host logs for a callback that threw: Neovim reports
-- it as an error message (nvim_err_writeln: v:errmsg), luv on stderr.  In
-- luajit, stderr is redirected by the runner to a file we read back.
function H.logged()
  if H.nvim then
    return vim.v.errmsg or ''
  end
  local path = os.getenv('UVTL_STDERR')
  if path == nil then
    return ''
  end
  io.stderr:flush()
  local f = io.open(path, 'rb')
  if f == nil then
    return ''
  end
  local s = f:read('*a')
  f:close()
  return s
end

-- Neovim collects messages; the errors of luv callbacks arrive through its
-- event queue (the next loop turn).  Every error message since the call.
function H.messages()
  if H.nvim then
    return vim.api.nvim_exec('messages', true)
  end
  return H.logged()
end

function H.eq(a, b, what)
  if a ~= b then
    error(string.format('%s: expected %s, got %s', what or 'value', tostring(b), tostring(a)), 2)
  end
end

function H.ok(v, what)
  if not v then
    error('expected true: ' .. (what or ''), 2)
  end
end

-- pcall(f, ...) that must fail with a message starting with `code`.
function H.raises(code, f, ...)
  local ok, err = pcall(f, ...)
  if ok then
    error('expected an error ' .. code .. ', but the call returned', 2)
  end
  if type(err) ~= 'string' or err:sub(1, #code + 1) ~= code .. ':' then
    error('expected an error ' .. code .. ', got: ' .. tostring(err), 2)
  end
  return err
end

-- Is process `pid` alive (not a zombie)?
function H.alive(pid)
  local f = io.open('/proc/' .. pid .. '/stat', 'r')
  if f == nil then
    return false
  end
  local s = f:read('*a') or ''
  f:close()
  local state = s:match('%) (%a)')
  return state ~= nil and state ~= 'Z' and state ~= 'X'
end

-- Processes whose environment holds NAME=value (a test's mark).
function H.marked(entry)
  local out = {}
  local p = io.popen('grep -lzxF -e "' .. entry .. '" /proc/[0-9]*/environ 2>/dev/null')
  for line in p:lines() do
    local pid = tonumber(line:match('^/proc/(%d+)/environ$'))
    if pid ~= nil and H.alive(pid) then
      out[#out + 1] = pid
    end
  end
  p:close()
  return out
end

-- A mark unique to this run, for the environment of the tasks a test
-- starts (so that what they leave behind can be found).
local seq = 0
function H.mark(name)
  seq = seq + 1
  return string.format('UVTL_TEST_MARK=%d-%s-%d', uv.os_getpid(), name, seq)
end

-- Waits until a file exists and holds a whole line; returns its text.
function H.read_file(path)
  local f = io.open(path, 'rb')
  if f == nil then
    return nil
  end
  local s = f:read('*a')
  f:close()
  return s
end

function H.tmpdir()
  local d = os.getenv('UVTL_TMP') or '/tmp'
  local p = io.popen('mktemp -d ' .. d .. '/uvtl.XXXXXX')
  local path = p:read('*l')
  p:close()
  return path
end

-- ---- running ---------------------------------------------------------------

local tests = {}

function H.test(name, fn, opts)
  tests[#tests + 1] = { name = name, fn = fn, opts = opts or {} }
end

local function finish(failed)
  io.stdout:flush()
  if H.nvim then
    if failed == 0 then
      vim.cmd('qa!')
    else
      vim.cmd('cquit 1')
    end
  else
    -- Closing the state runs every finaliser (lua_close), as the end of a
    -- script does: what the module holds is freed (the ASan lane checks).
    os.exit(failed == 0 and 0 or 1, true)
  end
end

function H.run()
  local passed, failed, skipped = 0, 0, 0
  local only = os.getenv('UVTL_ONLY')
  io.stdout:write(string.format('1..%d\n', #tests))
  for i, t in ipairs(tests) do
    if (t.opts.host ~= nil and t.opts.host ~= H.host) or (only ~= nil and not t.name:find(only, 1, true)) then
      skipped = skipped + 1
      io.stdout:write(string.format('ok %d - %s # SKIP not for %s\n', i, t.name, H.host))
    else
      local ok, err = xpcall(t.fn, debug.traceback)
      if ok then
        passed = passed + 1
        io.stdout:write(string.format('ok %d - %s\n', i, t.name))
      else
        failed = failed + 1
        io.stdout:write(string.format('not ok %d - %s\n', i, t.name))
        for line in tostring(err):gmatch('[^\n]+') do
          io.stdout:write('# ' .. line .. '\n')
        end
      end
    end
    io.stdout:flush()
  end
  io.stdout:write(string.format('# %d passed, %d failed, %d skipped\n', passed, failed, skipped))
  finish(failed)
end

return H
