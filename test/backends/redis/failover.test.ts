// A master's death under traffic, on real servers of our own (sentinel.ts starts them on free
// ports and stops them by their pids): a Fastify app on the Redis backend takes steady HTTP
// traffic over real sockets while the master holding its quotas is SIGKILLed and a replica is
// promoted in its place — by sentinels (through ioredis's sentinel mode and node-redis's
// createSentinel) and by Redis Cluster itself (through ioredis's Cluster and node-redis's
// createCluster). The app and its client are never restarted.
//
// What a user can see is asserted, not how long things took:
// - every request is answered 200, 429 or 503 — never a 500, never a failed request — and each
//   503 and 429 carries Retry-After; no 503 before the kill (Redis answered then);
// - every request is answered, not hung: each within 20 × timeoutMs, a liveness bound far above
//   the backend's timer (a busy machine must not fail it; no timing is a performance claim);
// - decisions come back on the promoted replica: fresh identities admitted again, quotas spent
//   there refused with 429, and a quota first used after the failover admits exactly its limit,
//   its key on the promoted node;
// - over-admission is bounded: replication is asynchronous, so the promoted replica's copy of a
//   key may be older than the master's (or missing), which can re-open at most one limit per key.
//   Each shared quota is half spent when the master dies and spent on across the failover, in one
//   window: at most 2 × the limit admitted for it. On one host replication is all but instant, so
//   a last sentinel case makes the loss certain (the replica cut off before the kill) and checks
//   that exactly what the lost writes had spent is admitted again, never more than a limit.
// The numbers a user would ask about (how long decisions were unavailable, how many 503s, the
// largest latency, what was admitted) are reported as comments, for docs/guides/redis-failover.md.
import { Agent } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { Cluster, Redis } from 'ioredis'
import { createCluster, createSentinel } from 'redis'
import { admission, redisBackend, type AdmissionStats } from '../../../lib/index.js'
import type { NodeRedisScriptClient, RedisBackendClient, RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { windowAround } from './children.js'
import { keysUnder, redisServerMissing, serverNow, timedGet, type Timed } from './helpers.js'
import { clusterView, info, MASTER_NAME, redisCliMissing, startReplicatedCluster, startSentinelSet, waitFor, type ClusterNode, type SentinelSet } from './sentinel.js'

/** The backend's timeout: ample for a loopback round trip on a busy two-core machine. */
const TIMEOUT_MS = 250
/** Answered, not hung: far above the timer that bounds each decision. */
const HUNG_MS = 20 * TIMEOUT_MS
const LIMIT = 40
/** The largest lease of the run with leases on. */
const LEASE_UNITS = 8
/** Identities whose quotas are spent across the failover. */
const SHARED = 3
/** Concurrent request loops, each pausing PACE_MS between its requests (so 503s do not spin). */
const LOOPS = 4
const PACE_MS = 10
/** Decisions sent after the promotion that must be admitted before the traffic stops. */
const BACK = 20
const SENTINEL_TIMING = { downAfterMs: 500, failoverTimeoutMs: 2000 }
const NODE_TIMEOUT_MS = 1000

const skip = await redisServerMissing()
const skipCluster = skip === false ? await redisCliMissing() : skip

type Kind = 'shared' | 'fresh' | 'bystander' | 'after'

interface Answer extends Timed {
  readonly id: string
  readonly kind: Kind
}

/** The identities a run uses; all but the bystanders have their keys on the master that dies. */
interface Identities {
  readonly shared: readonly string[]
  /** A new identity at each call. */
  fresh (): string
  /** A new identity on another master at each call (a cluster only). */
  readonly bystander?: () => string
  /** First used once the traffic is over: a quota that lives only on the promoted node. */
  readonly after: string
}

interface Failover {
  /** The app's client, connected. */
  readonly client: RedisBackendClient
  /** The master that dies, for the server's clock. */
  readonly victim: Redis
  /** The replica that takes its place. */
  readonly promoted: Redis
  identities (port: number, prefix: string): Promise<Identities>
  /** SIGKILLs the master, by its pid. */
  kill (): void
  /** Resolves once the topology names the replica in the master's place (polled, with a deadline). */
  promotion (): Promise<void>
}

async function gate (t: Test, client: RedisBackendClient, prefix: string, windowMs: number, leases: boolean): Promise<{ app: FastifyInstance, port: number }> {
  const app = Fastify()
  await app.register(admission, {
    backend: redisBackend({ client, prefix, timeoutMs: TIMEOUT_MS, ...(leases ? { leases: { maxUnits: LEASE_UNITS, holdMs: 100 } } : {}) }),
    rateLimit: { algorithm: 'fixed-window', limit: LIMIT, windowMs },
    key: (request) => String(request.headers['x-id'] ?? 'anonymous'),
    onBackendError: 'deny'
  })
  app.get('/work', async () => 'ok')
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  return { app, port: (app.server.address() as AddressInfo).port }
}

/** LOOPS loops of GETs, each with a pause: every other request a shared identity, the rest new ones. */
function traffic (port: number, ids: Identities): { answers: Answer[], stop (): Promise<void> } {
  const agent = new Agent({ keepAlive: true, maxSockets: LOOPS })
  const answers: Answer[] = []
  let stopping = false
  let n = 0
  const pick = (i: number): { id: string, kind: Kind } => {
    if (i % 2 === 0) return { id: ids.shared[(i / 2) % ids.shared.length] as string, kind: 'shared' }
    if (ids.bystander !== undefined && i % 4 === 3) return { id: ids.bystander(), kind: 'bystander' }
    return { id: ids.fresh(), kind: 'fresh' }
  }
  const loops = Array.from({ length: LOOPS }, async () => {
    while (!stopping) {
      const { id, kind } = pick(n++)
      answers.push({ ...await timedGet(port, '/work', { 'x-id': id }, agent), id, kind })
      await sleep(PACE_MS)
    }
  })
  return {
    answers,
    async stop () {
      stopping = true
      await Promise.all(loops)
      agent.destroy()
    }
  }
}

/**
 * `client` as the backend calls it, noting the client's own rejections by message: what a
 * decision met during the failover (its 503 may have come from the backend's timer first).
 */
function noting (client: RedisBackendClient): { client: RedisBackendClient, errors: Map<string, number> } {
  const errors = new Map<string, number>()
  const note = (result: Promise<unknown>): Promise<unknown> => {
    result.catch((error: unknown) => {
      // Ports and counts vary from run to run: one entry per kind of error.
      const message = String((error as Error).message ?? error).replace(/\d{3,}/g, 'N').slice(0, 90)
      errors.set(message, (errors.get(message) ?? 0) + 1)
    })
    return result
  }
  if (typeof (client as RedisScriptClient).evalsha === 'function') {
    const io = client as RedisScriptClient
    const wrapped: RedisScriptClient = { evalsha: (sha, n, ...rest) => note(io.evalsha(sha, n, ...rest)), eval: (script, n, ...rest) => note(io.eval(script, n, ...rest)) }
    return { errors, client: wrapped }
  }
  const node = client as NodeRedisScriptClient
  const wrapped: NodeRedisScriptClient = { evalSha: (sha, options) => note(node.evalSha(sha, options)), eval: (script, options) => note(node.eval(script, options)) }
  return { errors, client: wrapped }
}

function delta (after: AdmissionStats, before: AdmissionStats): Record<string, number> {
  return { admitted: after.admitted - before.admitted, limited: after.limited - before.limited, shed: after.shed - before.shed, unavailable: after.unavailable - before.unavailable }
}

const ms = (n: number): string => `${n.toFixed(0)} ms`

/**
 * The app on `f.client`, traffic across the master's death and the promotion, then the checks a
 * user would make; the numbers measured, as comments.
 */
async function survives (t: Test, label: string, f: Failover, leases = false): Promise<void> {
  const windowMs = windowAround(await serverNow(f.victim), 120_000)
  const window = async (): Promise<number> => Math.floor(await serverNow(f.promoted) / windowMs)
  const prefix = `failover:${label}:`
  const noted = noting(f.client)
  const { app, port } = await gate(t, noted.client, prefix, windowMs, leases)
  const ids = await f.identities(port, prefix)
  const first = await window()
  // The first decision on the master's own connection opens it and loads the script there (a
  // NOSCRIPT, then EVAL): on a busy machine that may outlast timeoutMs (a 503). A precondition,
  // not the claim: tried again, a few times, before the traffic whose 503s are counted starts.
  const warmOnce = async (): Promise<Answer> => {
    const warmId = ids.fresh()
    return { ...await timedGet(port, '/work', { 'x-id': warmId }), id: warmId, kind: 'fresh' }
  }
  let warm = await warmOnce()
  for (let attempt = 1; attempt < 5 && warm.status !== 200; attempt++) warm = await warmOnce()
  t.equal(warm.status, 200, 'before the kill: a decision made on the master')
  const before = app.admission.stats()
  const flow = traffic(port, ids)
  // Should a wait below throw, the loops must still end (stop() may run twice).
  t.teardown(() => flow.stop())
  const admitted = (id: string): number => flow.answers.filter((a) => a.id === id && a.status === 200).length

  // The kill lands while the shared quotas are being spent: half of each is, the rest is to come.
  await waitFor('half of each shared quota spent', 20_000, async () => ids.shared.every((id) => admitted(id) >= LIMIT / 2) || undefined)
  const atKill = ids.shared.map(admitted)
  const killedAt = performance.now()
  f.kill()
  let promotedAt = Number.NaN
  let back = false
  try {
    await f.promotion()
    promotedAt = performance.now()
    // Decisions are back once fresh identities are admitted again and every shared quota has
    // been refused on the promoted node.
    await waitFor('decisions back on the promoted replica', 20_000, async () => {
      const fresh = flow.answers.filter((a) => a.sentAt > promotedAt && a.kind === 'fresh' && a.status === 200).length
      const refused = ids.shared.every((id) => flow.answers.some((a) => a.id === id && a.sentAt > killedAt && a.status === 429))
      return (fresh >= BACK && refused) || undefined
    })
    back = true
  } catch (error) {
    t.fail((error as Error).message)
  }
  await flow.stop()

  // A quota first used now: decided on the promoted node only, exactly.
  const after: Answer[] = []
  for (let i = 0; i <= LIMIT; i++) after.push({ ...await timedGet(port, '/work', { 'x-id': ids.after }), id: ids.after, kind: 'after' })
  t.equal(await window(), first, 'precondition: the whole run in one window of the quota')

  const answers = [warm, ...flow.answers, ...after]
  const count = (status: number): number => answers.filter((a) => a.status === status).length
  const show = (a: Timed): string => `${a.status} ${a.error ?? ''} after ${ms(a.latencyMs)}`.trim()
  t.same(answers.filter((a) => a.status !== 200 && a.status !== 429 && a.status !== 503).map(show), [],
    `every one of ${answers.length} requests answered 200, 429 or 503: no 500, no failed request`)
  t.same(answers.filter((a) => a.latencyMs > HUNG_MS).map(show), [], `every request answered, not hung (each within ${HUNG_MS} ms, 20 × timeoutMs)`)
  t.same(answers.filter((a) => (a.status === 503 || a.status === 429) && !/^[1-9][0-9]*$/.test(a.retryAfter ?? '')).map((a) => `${a.status} Retry-After ${a.retryAfter}`), [],
    'every 503 and 429 carries Retry-After (whole seconds ≥ 1)')
  t.same(answers.filter((a) => a.status === 503 && a.sentAt + a.latencyMs < killedAt).map(show), [], 'no 503 before the kill: Redis answered')
  t.ok(count(503) > 0, `503s while Redis could not answer (${count(503)}): the default onBackendError, 'deny'`)
  t.same(delta(app.admission.stats(), before), { admitted: count(200) - 1, limited: count(429), shed: 0, unavailable: count(503) },
    'stats: each 503 counted as unavailable, none as shed')

  if (back) {
    const fresh = flow.answers.filter((a) => a.sentAt > promotedAt && a.kind === 'fresh')
    t.ok(fresh.filter((a) => a.status === 200).length >= BACK, `decisions back after the promotion, same app and client: ${fresh.filter((a) => a.status === 200).length} new identities admitted`)
  }
  t.same(after.map((a) => a.status), [...Array.from({ length: LIMIT }, () => 200), 429], `a quota first used after the failover: exactly ${LIMIT} admitted, then 429`)
  const afterKeys = (await keysUnder(f.promoted, prefix)).filter((key) => key.endsWith(`:${ids.after}}`))
  t.equal(afterKeys.length, 1, 'its key is on the promoted node')
  const total = ids.shared.map(admitted)
  for (const [i, id] of ids.shared.entries()) {
    // With leases, a lease taken on the master and lost with it may be used too (docs/guides/hot-keys.md).
    const most = 2 * LIMIT + (leases ? LEASE_UNITS : 0)
    t.ok(total[i] as number <= most, `${id}: ${total[i]} admitted in one window across the failover (${atKill[i]} before the kill), at most ${most}: one extra limit${leases ? ' and one lease' : ''} at most`)
    t.ok(flow.answers.some((a) => a.id === id && a.sentAt > killedAt && a.status === 429), `${id}: refused on the promoted node once spent`)
  }

  // What a user would ask; quoted in docs/guides/redis-failover.md.
  const since = (a: Answer): number => a.sentAt - killedAt
  const victimAnswers = flow.answers.filter((a) => a.kind !== 'bystander')
  const firstBack = victimAnswers.find((a) => a.sentAt > killedAt && a.status === 200)
  const refusals = answers.filter((a) => a.status === 503)
  const bystanders = flow.answers.filter((a) => a.kind === 'bystander')
  const span = (list: Answer[]): string => `${list.length} × 503${list.length > 0 ? ` (sent ${ms(since(list[0] as Answer))} … ${ms(since(list[list.length - 1] as Answer))} after the kill)` : ''}`
  const largest = (list: Timed[]): number => list.reduce((m, a) => Math.max(m, a.latencyMs), 0)
  t.comment([
    `${label}: ${answers.length} requests (timeoutMs ${TIMEOUT_MS}, ${LOOPS} loops)`,
    `promotion seen ${ms(promotedAt - killedAt)} after the kill`,
    `decisions unavailable for ${firstBack === undefined ? 'ever' : ms(since(firstBack))} (kill → first admitted request sent after it)`,
    span(refusals),
    `largest latency ${ms(largest(answers))} (of a 503: ${ms(largest(refusals))}; their Retry-After: ${[...new Set(refusals.map((a) => a.retryAfter))].join(', ')} s)`,
    `shared quotas admitted ${total.join(', ')} of ${LIMIT} (${atKill.join(', ')} at the kill)`,
    ...(bystanders.length > 0 ? [`keys on the other masters: ${bystanders.length} requests, ${span(bystanders.filter((a) => a.status === 503))}`] : [])
  ].join('; '))
  t.comment(`${label}: the client's rejections: ${[...noted.errors].map(([message, n]) => `${n} × ${message}`).join('; ') || 'none'}`)
}

/** Identities on one server: any name will do. */
function anyIdentities (): (port: number) => Promise<Identities> {
  let n = 0
  return async () => ({ shared: Array.from({ length: SHARED }, (_, i) => `shared-${i}`), fresh: () => `fresh-${n++}`, after: 'after' })
}

/** The sentinels, all of them, name the replica as the master, and the replica says it is one. */
async function promotedBySentinels (set: SentinelSet): Promise<void> {
  await waitFor('the sentinels promoting the replica', 20_000, async () => {
    for (let i = 0; i < set.sentinels.length; i++) if (await set.masterPortSeenBy(i) !== set.replica.port) return undefined
    return (await info(set.replicaClient, 'replication')).role === 'master' || undefined
  }, async () => `sentinels name ${(await Promise.all(set.sentinels.map((_, i) => set.masterPortSeenBy(i)))).join(', ')}; the replica is ${set.replica.port}`)
}

function sentinelFailover (set: SentinelSet, client: RedisBackendClient): Failover {
  return {
    client,
    victim: set.master.admin,
    promoted: set.replicaClient,
    identities: anyIdentities(),
    kill: () => { set.master.kill() },
    promotion: () => promotedBySentinels(set)
  }
}

/** The app's client through the sentinels, with the fail-fast options of docs/guides/redis-failover.md. */
async function ioredisSentinel (t: Test, set: SentinelSet): Promise<Redis> {
  const client = new Redis({
    sentinels: set.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    name: MASTER_NAME,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 1000,
    enableAutoPipelining: true,
    // Back to the sentinels soon after the master is gone, again and again until they name the new one.
    retryStrategy: () => 100,
    sentinelRetryStrategy: () => 100
  })
  client.on('error', () => { /* reconnecting: the backend reports it as RATES_UNAVAILABLE */ })
  await client.connect()
  t.teardown(() => { client.disconnect() })
  return client
}

t.test('Sentinel: the master SIGKILLed under traffic, its replica promoted', { skip, timeout: 90_000 }, async (t) => {
  // Three sentinels, quorum 2: a failover needs a majority to agree, as in production.
  const start = (t: Test, cuttable = false): Promise<SentinelSet> => startSentinelSet((fn) => t.teardown(fn), { count: 3, quorum: 2, timing: SENTINEL_TIMING, cuttable })

  await t.test('ioredis, sentinel mode', async (t) => {
    const set = await start(t)
    await survives(t, 'ioredis-sentinel', sentinelFailover(set, await ioredisSentinel(t, set)))
  })

  await t.test('ioredis, sentinel mode, leases on', async (t) => {
    const set = await start(t)
    await survives(t, 'ioredis-sentinel-leases', sentinelFailover(set, await ioredisSentinel(t, set)), true)
  })

  await t.test('node-redis, createSentinel', async (t) => {
    const set = await start(t)
    const client = createSentinel({
      name: MASTER_NAME,
      sentinelRootNodes: set.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
      nodeClientOptions: { disableOfflineQueue: true, socket: { connectTimeout: 1000, reconnectStrategy: 100 } },
      sentinelClientOptions: { socket: { connectTimeout: 1000, reconnectStrategy: 100 } }
    })
    client.on('error', () => { /* reconnecting: the backend reports it as RATES_UNAVAILABLE */ })
    await client.connect()
    t.teardown(() => client.destroy())
    t.equal(redisBackend({ client }).clientShape, 'node-redis', 'the sentinel client takes node-redis\'s calls (evalSha, eval)')
    await survives(t, 'node-redis-sentinel', sentinelFailover(set, client))
  })

  // On one host replication is all but instant, so the runs above lose nothing at the kill. Here
  // the loss is made certain: the replica is cut off from the master (its replication user
  // disabled) while the master takes more decisions, then the master dies. What the lost writes
  // had spent is admitted again on the promoted replica — exactly that, never more than a limit.
  await t.test('the replica cut off before the kill: each key re-opens exactly what the lost writes spent, at most one limit', async (t) => {
    const set = await start(t, true)
    const client = await ioredisSentinel(t, set)
    const windowMs = windowAround(await serverNow(set.master.admin), 120_000)
    const prefix = 'failover:cut:'
    const { port } = await gate(t, client, prefix, windowMs, false)
    const first = Math.floor(await serverNow(set.master.admin) / windowMs)
    const statuses = async (id: string, n: number): Promise<number[]> => {
      const out: number[] = []
      for (let i = 0; i < n; i++) out.push((await timedGet(port, '/work', { 'x-id': id })).status)
      return out
    }
    const ok = (n: number): number[] => Array.from({ length: n }, () => 200)
    const KEPT_BEFORE = 10
    const KEPT_CUT = 20
    const NEW_CUT = LIMIT - 1
    t.same(await statuses('kept', KEPT_BEFORE), ok(KEPT_BEFORE), `kept: ${KEPT_BEFORE} admitted, replicated`)
    await set.synced()
    await set.cutReplication()
    t.same(await statuses('kept', KEPT_CUT), ok(KEPT_CUT), `kept: ${KEPT_CUT} more, on the master only`)
    t.same(await statuses('new', NEW_CUT), ok(NEW_CUT), `new: ${NEW_CUT}, a key the replica never gets`)
    const onReplica = await keysUnder(set.replicaClient, prefix)
    t.ok(onReplica.some((k) => k.endsWith(':kept}')) && !onReplica.some((k) => k.endsWith(':new}')), 'precondition: the replica holds kept (as it was before the cut), not new')

    const killedAt = performance.now()
    set.master.kill()
    await promotedBySentinels(set)
    const probes: Timed[] = []
    await waitFor('decisions back on the promoted replica', 20_000, async () => {
      const answer = await timedGet(port, '/work', { 'x-id': `probe-${probes.length}` })
      probes.push(answer)
      return answer.status === 200 || undefined
    })
    t.same(probes.filter((a) => a.status !== 200 && a.status !== 503).map((a) => `${a.status} ${a.error ?? ''}`), [], `meanwhile (${probes.length} probes) only 200 or 503`)
    const spend = async (id: string): Promise<{ admitted: number, then: number }> => {
      for (let admitted = 0; ; admitted++) {
        const status = (await timedGet(port, '/work', { 'x-id': id })).status
        if (status !== 200 || admitted > 2 * LIMIT) return { admitted, then: status }
      }
    }
    const kept = await spend('kept')
    const fresh = await spend('new')
    t.equal(Math.floor(await serverNow(set.replicaClient) / windowMs), first, 'precondition: the whole run in one window of the quota')
    t.same([kept.then, fresh.then], [429, 429], 'each refused once spent on the promoted replica')
    t.equal(KEPT_BEFORE + KEPT_CUT + kept.admitted, LIMIT + KEPT_CUT, `kept: ${KEPT_BEFORE} + ${KEPT_CUT} + ${kept.admitted} admitted — the limit, plus the ${KEPT_CUT} the replica never saw`)
    t.equal(NEW_CUT + fresh.admitted, LIMIT + NEW_CUT, `new: ${NEW_CUT} + ${fresh.admitted} admitted — the limit, plus the ${NEW_CUT} of a key the replica never had`)
    t.ok(KEPT_BEFORE + KEPT_CUT + kept.admitted <= 2 * LIMIT && NEW_CUT + fresh.admitted <= 2 * LIMIT, `each at most 2 × ${LIMIT}: one extra limit per key at most`)
    t.comment(`replica cut off: decisions back ${ms((probes[probes.length - 1] as Timed).sentAt - killedAt)} after the kill, ${probes.filter((a) => a.status === 503).length} × 503 among ${probes.length} probes; kept ${KEPT_BEFORE + KEPT_CUT + kept.admitted} admitted, new ${NEW_CUT + fresh.admitted}, of ${LIMIT} each`)
  })
})

t.test('Cluster: the master of the test\'s slots SIGKILLed under traffic, its replica promoted', { skip: skipCluster, timeout: 90_000 }, async (t) => {
  /**
   * A fresh cluster; the victim is one of its masters, and the run's identities are chosen so
   * that their keys hash to its slots (the bystanders' to the others').
   */
  async function clusterFailover (t: Test, connect: (ports: number[]) => Promise<RedisBackendClient>): Promise<Failover> {
    const cluster = await startReplicatedCluster((fn) => t.teardown(fn), NODE_TIMEOUT_MS)
    const view = await clusterView((cluster.nodes[0] as ClusterNode).server.admin)
    const masterLine = view.find((l) => l.flags.includes('master') && l.slots.length > 0)
    if (masterLine === undefined) throw new Error('no master')
    const slot = (masterLine.slots[0] as readonly [number, number])[0]
    const { master, replica } = cluster.ownerOf(view, slot)
    const living = cluster.nodes.filter((node) => node !== master)
    return {
      client: await connect(cluster.nodes.map((node) => node.server.port)),
      victim: master.server.admin,
      promoted: replica.server.admin,
      async identities (port, prefix) {
        // The key of one decision shows how an identity is written into its key.
        t.equal((await timedGet(port, '/work', { 'x-id': 'probe' })).status, 200, 'a first decision')
        const probe = (await Promise.all(cluster.nodes.map((n) => keysUnder(n.server.admin, prefix)))).flat().find((key) => key.endsWith(':probe}'))
        if (probe === undefined) throw new Error('the probe decision left no key')
        const keyOf = (id: string): string => `${probe.slice(0, -'probe}'.length)}${id}}`
        const names = Array.from({ length: 12_000 }, (_, i) => `id-${i}`)
        const pipeline = master.server.admin.pipeline()
        for (const name of names) pipeline.call('CLUSTER', 'KEYSLOT', keyOf(name))
        const slots = (await pipeline.exec() ?? []).map(([, s]) => Number(s))
        const here = names.filter((_, i) => cluster.ownerOf(view, slots[i] as number).master === master)
        const elsewhere = names.filter((_, i) => cluster.ownerOf(view, slots[i] as number).master !== master)
        let fresh = SHARED + 1
        let other = 0
        return {
          shared: here.slice(0, SHARED),
          after: here[SHARED] as string,
          fresh: () => here[fresh++ % here.length] as string,
          bystander: () => elsewhere[other++ % elsewhere.length] as string
        }
      },
      kill: () => { master.server.kill() },
      promotion: async () => { await waitFor('the replica promoted on every living node', 20_000, async () => {
        for (const node of living) {
          if (!/cluster_state:ok/.test(String(await node.server.admin.call('CLUSTER', 'INFO')))) return undefined
          const owner = (await clusterView(node.server.admin)).find((l) => l.flags.includes('master') && l.slots.some(([from, to]) => slot >= from && slot <= to))
          if (owner?.id !== replica.id) return undefined
        }
        return true
      }, async () => (await clusterView(replica.server.admin)).map((l) => `${l.port} ${l.flags.join(',')}`).join('; ')) }
    }
  }

  await t.test('ioredis Cluster', async (t) => {
    await survives(t, 'ioredis-cluster', await clusterFailover(t, async (ports) => {
      const client = new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), {
        lazyConnect: true,
        enableOfflineQueue: false,
        enableAutoPipelining: true,
        redisOptions: { connectTimeout: 1000, maxRetriesPerRequest: 1 }
      })
      client.on('error', () => { /* a node down: the backend reports it as RATES_UNAVAILABLE */ })
      await client.connect()
      t.teardown(() => { client.disconnect() })
      return client
    }))
  })

  await t.test('node-redis, createCluster', async (t) => {
    await survives(t, 'node-redis-cluster', await clusterFailover(t, async (ports) => {
      const client = createCluster({
        rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
        defaults: { disableOfflineQueue: true, socket: { connectTimeout: 1000, reconnectStrategy: 100 } },
        // Asks for the topology again 500 ms after a node's first reconnection attempt (and each
        // 500 ms while it lasts), not after the default 5 s: the promoted replica is found soon.
        topologyRefreshOnReconnectionAttemptStrategy: 500
      })
      client.on('error', () => { /* a node down: the backend reports it as RATES_UNAVAILABLE */ })
      await client.connect()
      t.teardown(() => { client.destroy() })
      return client
    }))
  })
})
