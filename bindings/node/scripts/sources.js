// Which library sources a build of this package compiles (N-5, D1):
//
//  - a checkout (this folder is bindings/node of a uvtasks repository)
//    always builds the repository's own sources, whatever a past `npm pack`
//    left in deps/;
//  - anything else is a packed package (an installed tarball), which builds
//    only deps/uvtasks, the copy it was packed with, even when the folder
//    it was installed into happens to hold other uvtasks sources.
'use strict'
const fs = require('node:fs')
const path = require('node:path')

function hasLibrary(dir) {
  return fs.existsSync(path.join(dir, 'include', 'uvtasks.h')) &&
         fs.existsSync(path.join(dir, 'src', 'registry.c'))
}

function real(p) {
  try {
    return fs.realpathSync(p)
  } catch {
    return null
  }
}

// The repository `pkg` is the bindings/node folder of, or null.
function checkoutRoot(pkg) {
  const root = path.resolve(pkg, '..', '..')
  if (!hasLibrary(root)) return null
  const own = real(path.join(root, 'bindings', 'node'))
  return own !== null && own === real(pkg) ? root : null
}

// { root, origin: 'checkout' | 'packed' } for the package folder `pkg`;
// throws an Error naming what is missing.
function librarySources(pkg) {
  const repo = checkoutRoot(pkg)
  if (repo !== null) return { root: path.resolve(repo), origin: 'checkout' }
  const deps = path.join(pkg, 'deps', 'uvtasks')
  if (hasLibrary(deps)) return { root: path.resolve(deps), origin: 'packed' }
  throw new Error(`the library sources are missing: ${deps} has no ` +
                  'include/uvtasks.h and src/registry.c, and this folder is ' +
                  'not bindings/node of a uvtasks checkout')
}

module.exports = { librarySources, checkoutRoot }
