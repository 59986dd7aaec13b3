#!/usr/bin/env node
// `npm pack` / `npm publish` (postpack): removes what prepack added to the
// checkout (deps/uvtasks, prebuilds/), so the checkout goes on building and
// loading only its repository's sources (D1).
'use strict'
const fs = require('node:fs')
const path = require('node:path')

const pkg = path.resolve(__dirname, '..')
for (const d of ['deps', 'prebuilds']) {
  fs.rmSync(path.join(pkg, d), { recursive: true, force: true })
}
