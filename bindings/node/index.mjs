// ESM entry point: the same module as require('uvtasks') (one registry
// implementation per environment, whichever way it is loaded).
import uvtasks from './index.js'

export const { TaskRegistry, features, version } = uvtasks
