// A worker thread of stress.test.mjs: runs the deterministic scenario on its own breaker and
// quota (native objects belong to one thread's isolate) while the other workers do the same, so
// the addon and the core run on several OS threads at once.
import { parentPort, workerData } from 'node:worker_threads'
import * as holdoff from 'holdoff'
import { scenario } from './stress-script.mjs'

const results = []
for (let r = 0; r < workerData.repeats; r++) results.push(scenario(holdoff, workerData.options))
parentPort.postMessage(results)
