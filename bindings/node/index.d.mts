// Types of the ESM entry point (index.mjs): the names of index.d.ts, and
// the whole module as the default export.
import * as uvtasks from './index.js'
export * from './index.js'
export default uvtasks
