// The measured process: `node <flags> worker.mjs <variant> '<json LoadSpec without port>'`, under
// callgrind, started by run.ts (which bundles this file first, so no tsx runs in it). It starts the
// variant's server, runs the load against it in this same process, and prints a JSON LoadResult.
import { type LoadSpec, runLoad } from './load.js'
import { costVariant, start } from './variants.js'

const [name = '', specArg = '{}'] = process.argv.slice(2)
const server = await start(costVariant(name))
const result = await runLoad({ ...(JSON.parse(specArg) as Omit<LoadSpec, 'port'>), port: server.port })
await server.close()
process.stdout.write(JSON.stringify(result) + '\n')
