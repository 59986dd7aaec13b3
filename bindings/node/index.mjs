// ESM entry point: the same module as require('uvtasks') (one registry
// implementation per environment, whichever way it is loaded), with its
// names exported one by one and as the default export.
import uvtasks from './index.js'

export const { TaskRegistry, features, version } = uvtasks
export default uvtasks
