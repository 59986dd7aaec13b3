#!/usr/bin/env node
// `npm pack` / `npm publish`: copy the library's sources (include/, src/
// without the MCP server and the tool surface) into deps/uvtasks, so the
// tarball builds on its own; scripts/build.js prefers deps/uvtasks.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const pkg = path.resolve(__dirname, '..')
const root = path.resolve(pkg, '..', '..')
const dest = path.join(pkg, 'deps', 'uvtasks')

if (!fs.existsSync(path.join(root, 'include', 'uvtasks.h'))) {
  if (fs.existsSync(path.join(dest, 'include', 'uvtasks.h'))) process.exit(0)
  console.error('uvtasks: no library sources to vendor')
  process.exit(1)
}
// The package is the library's version: refuse to pack a mismatch.
const header = fs.readFileSync(path.join(root, 'include', 'uvtasks', 'version.h'), 'utf8')
const libVersion = /#define UVT_VERSION_STRING "([^"]+)"/.exec(header)[1]
const pkgVersion = require(path.join(pkg, 'package.json')).version
if (libVersion !== pkgVersion) {
  console.error(`uvtasks: package.json says ${pkgVersion}, the library is ${libVersion}`)
  process.exit(1)
}
fs.rmSync(dest, { recursive: true, force: true })
fs.mkdirSync(path.join(dest, 'src'), { recursive: true })
fs.cpSync(path.join(root, 'include'), path.join(dest, 'include'), { recursive: true })
for (const f of fs.readdirSync(path.join(root, 'src'))) {
  if (f.endsWith('.c') || f.endsWith('.h')) {
    fs.copyFileSync(path.join(root, 'src', f), path.join(dest, 'src', f))
  }
}
fs.cpSync(path.join(root, 'src', 'process'), path.join(dest, 'src', 'process'), { recursive: true })
fs.cpSync(path.join(root, 'src', 'leaf'), path.join(dest, 'src', 'leaf'), { recursive: true })
// D-1: durable tasks' keeper (built beside the addon).
fs.cpSync(path.join(root, 'src', 'keeper'), path.join(dest, 'src', 'keeper'), { recursive: true })
// S-2: the sandbox's own program (built beside the addon too).
fs.cpSync(path.join(root, 'src', 'sandbox'), path.join(dest, 'src', 'sandbox'), { recursive: true })
