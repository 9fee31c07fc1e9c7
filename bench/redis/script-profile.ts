// Where the script's time goes: `node --import tsx bench/redis/script-profile.ts [calls] [rounds]`.
// Runs variants of the decision script on a private redis-server, each cut short by an early
// `return` at one checkpoint (same reply shape as an allowed decision), plus the whole script and
// @fastify/rate-limit's, and reads Redis's time per call (`INFO commandstats`, evalsha). The
// difference between two neighbouring checkpoints is what the part between them costs. Rounds are
// interleaved (the order reversed every other round); the median over rounds is printed.
// PROFILE_MODE=refuse: one hot key, spent (a denial that changes nothing). PROFILE_BASELINE=<git
// ref>: the whole script as it was at that commit, beside today's.
import { execFileSync } from 'node:child_process'
import { Redis } from 'ioredis'
import { DECIDE_LUA } from '../../lib/backends/redis/decide-script.js'
import { median } from '../stats.js'
import { startPinnedRedis } from './private-redis.js'
import { countersBetween, readCounters, scriptCounters } from './redis-info.js'

const REDIS_CORE = 0
const [callsArg = '20000', roundsArg = '5'] = process.argv.slice(2)
const CALLS = Number(callsArg)
const ROUNDS = Number(roundsArg)
const BATCH = 100

/** Checkpoints: the script is cut just before the first line that starts with `anchor`. */
const CHECKPOINTS: Array<[name: string, anchor: string]> = [
  ['the call alone', 'local key = KEYS[1]'],
  ['+ arguments parsed', 'local now\n'],
  ['+ TIME', '-- arithmetic.ts'],
  ['+ policy constants', '-- The stored state, checked'],
  ['+ GET and validation', 'local t = now\n'],
  ['+ algorithm', '-- Expires when fully recovered'],
  ['+ state stored (format, SET or PTTL)', 'if allowed then\n']
]
/** What-if variants: the whole script with one text replaced (every occurrence). */
const WHAT_IF: Array<[name: string, from: string, to: string]> = []
/** DECIDE_LUA as it was at `ref` (its template literal has no substitutions). */
function scriptAt (ref: string): string {
  const source = execFileSync('git', ['show', `${ref}:lib/backends/redis/decide-script.ts`], { encoding: 'utf8' })
  const match = /export const DECIDE_LUA = `([^`]*)`/.exec(source)
  if (match === null) throw new Error(`no DECIDE_LUA at ${ref}`)
  if (match[1]!.includes('\\') || match[1]!.includes('${')) throw new Error(`DECIDE_LUA at ${ref} is not a plain template literal`)
  return match[1]!
}
const EARLY = 'do return { 0, 1, 0, 0, 0, 0 } end\n'

function cutAt (anchor: string): string {
  const at = DECIDE_LUA.indexOf('\n' + anchor)
  if (at === -1) throw new Error(`no line starting with ${JSON.stringify(anchor)} in the script`)
  return DECIDE_LUA.slice(0, at + 1) + EARLY + DECIDE_LUA.slice(at + 1)
}

const RATE_LIMIT_LUA = `local key = KEYS[1]
local timeWindow = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local continueExceeding = ARGV[3] == 'true'
local exponentialBackoff = ARGV[4] == 'true'
local MAX_SAFE_INTEGER = (2^53) - 1
local current = redis.call('INCR', key)
if current == 1 or (continueExceeding and current > max) then
  redis.call('PEXPIRE', key, timeWindow)
elseif exponentialBackoff and current > max then
  local backoffExponent = current - max - 1
  timeWindow = math.min(timeWindow * (2 ^ backoffExponent), MAX_SAFE_INTEGER)
  redis.call('PEXPIRE', key, timeWindow)
else
  timeWindow = redis.call('PTTL', key)
end
return {current, timeWindow}`

interface Variant { name: string, sha: string, args: (key: string) => string[] }

const server = await startPinnedRedis(REDIS_CORE)
try {
  const client = new Redis(server.url)
  const time = await client.time()
  const deadline = String(Number(time[0]) * 1000 + 1e9)
  const mode = process.env.PROFILE_MODE === 'refuse' ? 'refuse' : 'admit'
  const fingerprint = mode === 'admit' ? 'token-bucket:1000000000:60000:1000000000' : 'token-bucket:1:3600000:1'
  const ours = (key: string): string[] => [`admission:{bench#admission:*:${key}}`, fingerprint, '1', '', deadline]
  const variants: Variant[] = []
  for (const [name, anchor] of CHECKPOINTS) variants.push({ name, sha: await client.script('LOAD', cutAt(anchor)) as string, args: ours })
  variants.push({ name: 'whole script', sha: await client.script('LOAD', DECIDE_LUA) as string, args: ours })
  const baseline = process.env.PROFILE_BASELINE
  if (baseline !== undefined) variants.push({ name: `whole script at ${baseline}`, sha: await client.script('LOAD', scriptAt(baseline)) as string, args: ours })
  for (const [name, from, to] of WHAT_IF) {
    if (!DECIDE_LUA.includes(from)) throw new Error(`what-if ${name}: ${JSON.stringify(from)} is not in the script`)
    variants.push({ name, sha: await client.script('LOAD', DECIDE_LUA.replaceAll(from, to)) as string, args: ours })
  }
  const theirs = mode === 'admit' ? ['60000', '1000000000', 'false', 'false'] : ['3600000', '1', 'false', 'false']
  variants.push({ name: "@fastify/rate-limit's script", sha: await client.script('LOAD', RATE_LIMIT_LUA) as string, args: (key) => [`rl:${key}`, ...theirs] })
  let seed = 0x2545f491
  const nextKey = (): string => {
    if (mode === 'refuse') return 'one'
    seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5
    const i = (seed >>> 0) % 1_000_000
    return `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`
  }
  const run = async (v: Variant, calls: number): Promise<void> => {
    for (let i = 0; i < calls; i += BATCH) {
      const pipeline = client.pipeline()
      for (let j = 0; j < BATCH; j++) pipeline.evalsha(v.sha, 1, ...v.args(nextKey()))
      await pipeline.exec()
    }
  }
  const whole = variants.find((v) => v.name === 'whole script')!
  const rl = variants.at(-1)!
  const perCall: Record<string, number[]> = {}
  const cpuPerCall: Record<string, number[]> = {}
  for (let round = 1; round <= ROUNDS; round++) {
    for (const v of round % 2 === 1 ? variants : [...variants].reverse()) {
      // Every variant on an empty keyspace (a private server): no keys, expiries or rehashing
      // left over from the one before.
      await client.flushall()
      // Refusing: the hot key spent, so every call is a denial that changes nothing (a PTTL, no write).
      if (mode === 'refuse') await run(v === rl ? rl : whole, BATCH)
      await run(v, BATCH * 10)
      const before = await readCounters(client)
      await run(v, CALLS)
      const window = countersBetween(before, await readCounters(client))
      const script = scriptCounters(window)
      ;(perCall[v.name] ??= []).push(script.usec / script.calls)
      ;(cpuPerCall[v.name] ??= []).push(window.cpuSeconds * 1e6 / script.calls)
    }
  }
  client.disconnect()
  // usec_per_call is wall time inside the call (a busy machine's preemptions count); INFO cpu is
  // the process's CPU time (the network work of the pipelined calls included, the same for all).
  process.stdout.write(`${mode}: Redis µs per EVALSHA, median of ${ROUNDS} rounds, ${CALLS} calls each: usec_per_call | whole-server CPU per call\n`)
  const previous = [0, 0]
  for (const v of variants) {
    const values = [median(perCall[v.name]!), median(cpuPerCall[v.name]!)]
    const cells = values.map((value, i) => `${value.toFixed(2)}${v.name.startsWith('+') ? ` (${value - previous[i]! >= 0 ? '+' : ''}${(value - previous[i]!).toFixed(2)})` : ''}`.padEnd(16))
    process.stdout.write(`${v.name.padEnd(38)} ${cells.join(' | ')}\n`)
    values.forEach((value, i) => { previous[i] = value })
  }
} finally {
  await server.stop()
}
