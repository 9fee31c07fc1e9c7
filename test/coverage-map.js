// Coverage is measured on the source in lib/ only (not on the built dist/ that the export test
// loads, nor on test helpers). tap wants the files themselves, so list them.
//
// The map does not depend on whether a Redis answers: every line of lib/ is reached without one
// (the Redis backend and the gate's round-trip path through scripted clients, in
// test/backends/redis/backend.test.ts and gate-scripted.test.ts), so 100 % is enforced on all of
// lib/ on a machine with no Redis too, where the tests that need a server are skipped with the
// reason. Keep it so: a line that only a real server reaches would fail that run.
import { readdirSync } from 'node:fs'

const sources = readdirSync('lib', { recursive: true })
  .map(String)
  .filter((file) => file.endsWith('.ts'))
  .map((file) => `lib/${file}`)

export default function coverageMap () {
  return sources
}
