import t from 'tap'
import { readFileSync } from 'node:fs'
import semver from 'semver'

// The optional peers' ranges take the current major of each client users bring: an install next to
// it must not fail with ERESOLVE. Each major named here is installed for the tests (ioredis 6 as
// `ioredis6`) and its clients are driven against a real server in test/backends/redis/clients.test.ts.
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { peerDependencies: Record<string, string> }
const installed = (name: string): string => (JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')) as { version: string }).version

t.test('the current majors of ioredis, iovalkey and node-redis are within the peer ranges', async (t) => {
  for (const [peer, module] of [['ioredis', 'ioredis'], ['ioredis', 'ioredis6'], ['iovalkey', 'iovalkey'], ['redis', 'redis']] as const) {
    const version = installed(module)
    t.ok(semver.satisfies(version, pkg.peerDependencies[peer]!), `${peer} ${version} satisfies ${pkg.peerDependencies[peer]}`)
  }
  t.equal(semver.major(installed('ioredis6')), 6, 'ioredis 6 is the one tested')
})
