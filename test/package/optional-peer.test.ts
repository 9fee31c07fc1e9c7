import t from 'tap'
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

// prom-client is an optional peer: the built package, installed in an app that has fastify but
// not prom-client, loads and serves without it, and a registration asking for metrics fails with
// the typed error that says to install it — from ESM and from CommonJS. `npm test` builds first.

const dir = mkdtempSync(join(tmpdir(), 'fastify-admission-no-prom-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const modules = join(dir, 'node_modules')
// A copy, not a link: Node resolves a linked package's imports from its real place, which has prom-client.
const installed = join(modules, 'fastify-admission')
mkdirSync(installed, { recursive: true })
cpSync('dist', join(installed, 'dist'), { recursive: true })
cpSync('package.json', join(installed, 'package.json'))
for (const dependency of ['fastify', 'fastify-plugin']) symlinkSync(resolve('node_modules', dependency), join(modules, dependency), 'dir')

const script = (load: string): string => `
${load}
const app = Fastify()
await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
app.get('/', async () => 'ok')
const served = (await app.inject('/')).statusCode
await app.close()
const other = Fastify()
const error = await other.register(admission, { metrics: { registry: { registerMetric () {}, getSingleMetric () {}, removeSingleMetric () {} } } }).then(() => undefined, (e) => e)
console.log(JSON.stringify({ served, name: error?.name, code: error?.code, path: error?.path, message: error?.message }))
`

for (const [kind, file, load] of [
  ['ESM', 'app.mjs', "import Fastify from 'fastify'\nimport admission from 'fastify-admission'"],
  ['CommonJS', 'app.cjs', "const Fastify = require('fastify')\nconst admission = require('fastify-admission')\n;(async () => {"]
] as const) {
  t.test(`${kind}: no prom-client installed`, async (t) => {
    const body = kind === 'ESM' ? script(load) : `${script(load)}})()`
    writeFileSync(join(dir, file), body)
    const out = JSON.parse(execFileSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' })) as Record<string, unknown>
    t.equal(out.served, 200, 'the plugin works without its optional peer')
    t.match(out, { name: 'AdmissionOptionError', code: 'ADMISSION_INVALID_OPTION', path: 'metrics' })
    t.match(out.message, /peer dependency prom-client is installed \(npm install prom-client\), got prom-client could not be loaded \(Cannot find (package|module) 'prom-client'/)
  })
}
