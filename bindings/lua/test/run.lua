-- Runs one test file of the Lua module (LU-4) in this host: luajit with
-- luv, or nvim --headless (see harness.lua).
local dir = os.getenv('UVTL_TEST_DIR')
package.path = dir .. '/?.lua;' .. package.path
local H = require('harness')
dofile(dir .. '/' .. os.getenv('UVTL_TEST') .. '.lua')
H.run()
