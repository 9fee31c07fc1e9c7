// Redis Cluster, for real: three masters of our own (redis-server --cluster-enabled yes on free
// ports, joined by `redis-cli --cluster create`), killed by their pids at teardown, their
// directories removed. The shared server is not used here.
//
// - through an ioredis `Cluster` and a node-redis `createCluster()` client: every algorithm, with
//   exact limits, on identities spread over the three masters; the script, absent from each node
//   until its first use there, loaded by one EVAL per node after its NOSCRIPT;
// - 4 processes (this file as a child, as in shared-quota.test.ts), each its own Fastify app and
//   its own Cluster client: one identity per route hammered through all of them, exactly the
//   limit admitted;
// - a slot migrated (CLUSTER SETSLOT … IMPORTING / MIGRATING, MIGRATE, SETSLOT … NODE) while
//   decisions on a key of that slot run: ASK and MOVED are followed by the client, the state moves
//   with the key, and exactly the limit is admitted over the whole run;
// - a charge's debt and a fleet's membership through both clients;
// - leases (lease-run.ts) through both clients: a hot identity within its limit, exact once the
//   leases went back, and far fewer script calls than decisions.
import { spawn } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { Cluster, type Redis } from 'ioredis'
import type { Test } from 'tap'
import type { Policy } from '../../../lib/core/rates/index.js'
import { DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { admission, redisBackend } from '../../../lib/index.js'
import type { NodeRedisScriptOptions, RedisBackendClient } from '../../../lib/backends/redis/redis-backend.js'
import { hammer, killSpawned, startChild, statsOf, windowAround, type Child, type ToChild, type ToParent } from './children.js'
import { leasesOnRealServers } from './lease-run.js'
import { counting, freePort, keysUnder, redisServerMissing, run, serverNow, startPrivateServer, type PrivateServer } from './helpers.js'

const CHILD = 'ADMISSION_CLUSTER_CHILD'
const PROCESSES = 4
const REQUESTS = 240
const CONCURRENCY = 32
const LIMIT = 5
const QUOTA = 40
const ALGORITHMS = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'] as const


if (process.env[CHILD] === '1') await serve()
else await tests()

/** An ioredis Cluster client on the nodes at `ports` (any one would do: it discovers the rest). */
function ioCluster (ports: number[]): Cluster {
  return new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), {
    lazyConnect: true,
    enableOfflineQueue: true,
    redisOptions: { connectTimeout: 1000, maxRetriesPerRequest: 1 }
  })
}

/** The child: one Fastify app, a route per policy, its own Cluster client; answers the parent. */
async function serve (): Promise<void> {
  const routes = JSON.parse(process.env.CLUSTER_ROUTES as string) as Record<string, Policy>
  const cluster = ioCluster(JSON.parse(process.env.CLUSTER_PORTS as string) as number[])
  await cluster.connect()
  const app = Fastify()
  await app.register(admission, {
    // Generous: this is about atomicity over processes and shards, not latency.
    backend: redisBackend({ client: cluster, prefix: process.env.CLUSTER_PREFIX as string, timeoutMs: 5000 }),
    rateLimit: false,
    key: () => 'one-client'
  })
  for (const [path, policy] of Object.entries(routes)) {
    app.get(path, { config: { admission: { rateLimit: policy } } }, async () => ({ pid: process.pid }))
  }
  await app.listen({ port: 0, host: '127.0.0.1' })
  const send = (message: ToParent): void => { process.send?.(message) }
  let closing = false
  process.on('disconnect', () => { if (!closing) process.exit(2) })
  process.on('message', (message: ToChild) => {
    if (message.type === 'stats') {
      send({ type: 'stats', stats: app.admission.stats() })
      return
    }
    closing = true
    void app.close().then(() => cluster.quit()).then(() => { process.disconnect() })
  })
  send({ type: 'listening', port: (app.server.address() as AddressInfo).port })
}

function policiesFor (limit: number, windowMs: number): Record<(typeof ALGORITHMS)[number], Policy> {
  return {
    'token-bucket': { algorithm: 'token-bucket', limit, windowMs: 3_600_000, burst: limit },
    gcra: { algorithm: 'gcra', limit, windowMs: 3_600_000, burst: limit },
    'fixed-window': { algorithm: 'fixed-window', limit, windowMs },
    'sliding-window-counter': { algorithm: 'sliding-window-counter', limit, windowMs }
  }
}


async function redisCliMissing (): Promise<string | false> {
  const { code, output } = await run('redis-cli', ['--version'])
  return code === 0 ? false : `redis-cli is not available (${output.trim()}); the cluster test needs it`
}

interface Node {
  readonly server: PrivateServer
  readonly id: string
}

/** Three masters of our own, joined into a cluster that reports cluster_state:ok on every node. */
async function startCluster (teardown: (fn: () => Promise<void>) => void): Promise<Node[]> {
  const servers: PrivateServer[] = []
  teardown(async () => { for (const server of servers) await server.stop() })
  for (let i = 0; i < 3; i++) {
    const port = await freePort()
    // The cluster bus on a free port of its own (the default, port + 10 000, may be taken).
    const bus = await freePort()
    servers.push(await startPrivateServer(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-port', String(bus), '--cluster-node-timeout', '5000'], port))
  }
  const created = await run('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-yes'])
  if (created.code !== 0) throw new Error(`redis-cli --cluster create failed (${created.code}): ${created.output}`)
  const ok = async (server: PrivateServer): Promise<boolean> => /cluster_state:ok/.test(String(await server.admin.call('CLUSTER', 'INFO')))
  for (let attempt = 0; ; attempt++) {
    if ((await Promise.all(servers.map(ok))).every(Boolean)) break
    if (attempt > 300) throw new Error('the cluster did not reach cluster_state:ok within 15 s')
    await sleep(50)
  }
  // Every node sees all three masters with their slots (the gossip may lag cluster_state:ok).
  for (let attempt = 0; ; attempt++) {
    const views = await Promise.all(servers.map(async (s) => String(await s.admin.call('CLUSTER', 'NODES'))))
    if (views.every((view) => view.trim().split('\n').filter((line) => / master /.test(` ${line} `.replace(/,/g, ' ')) && /\d+-\d+/.test(line)).length === 3)) break
    if (attempt > 300) throw new Error(`the nodes do not agree on three masters: ${views.join('\n')}`)
    await sleep(50)
  }
  return Promise.all(servers.map(async (server) => ({ server, id: String(await server.admin.call('CLUSTER', 'MYID')) })))
}

/** The node whose master serves `slot`, from one node's CLUSTER NODES. */
async function ownerOf (nodes: Node[], slot: number): Promise<Node> {
  const view = String(await (nodes[0] as Node).server.admin.call('CLUSTER', 'NODES'))
  for (const line of view.trim().split('\n')) {
    const [id, , , , , , , , ...ranges] = line.split(' ')
    for (const range of ranges) {
      if (range.startsWith('[')) continue
      const [from, to = from] = range.split('-').map(Number) as [number, number?]
      if (slot >= from && slot <= (to as number)) return nodes.find((node) => node.id === id) as Node
    }
  }
  throw new Error(`no owner for slot ${slot}: ${view}`)
}

async function tests (): Promise<void> {
  const { default: t } = await import('tap')
  // Only here: the children do not need node-redis (it is slow to load).
  const { createCluster } = await import('redis')
  const skip = (await redisServerMissing()) || (await redisCliMissing())

  t.test('Redis Cluster (3 masters of our own)', { skip, timeout: 150_000 }, async (t) => {
    const begun = performance.now()
    const nodes = await startCluster((fn) => t.teardown(fn))
    const admins: Redis[] = nodes.map((node) => node.server.admin)
    const ports = nodes.map((node) => node.server.port)
    t.pass(`cluster_state:ok on ${ports.join(', ')} after ${(performance.now() - begun).toFixed(0)} ms`)
    const windowMs = windowAround(await serverNow(admins[0] as Redis), 60_000)
    const policies = policiesFor(LIMIT, windowMs)
    const identities = Array.from({ length: 12 }, (_, i) => `client-${i}`)

    /**
     * The first decision on each node, one node at a time: the node answers NOSCRIPT, one EVAL
     * loads the script there (and only there), and that decision is made all the same.
     */
    async function firstUseOnEachNode (t: Test, client: RedisBackendClient, calls: { evalsha: number, eval: number }, prefix: string): Promise<void> {
      const limiter = redisBackend({ client, prefix, timeoutMs: 5000, denyCache: false }).limiter('app#first', policies['token-bucket'])
      for (const [i, node] of nodes.entries()) {
        let identity = ''
        for (let n = 0; identity === ''; n++) {
          const slot = Number(await (admins[0] as Redis).call('CLUSTER', 'KEYSLOT', limiter.keyOf(`first-${n}`)))
          if ((await ownerOf(nodes, slot)).id === node.id) identity = `first-${n}`
        }
        const before = { ...calls }
        t.match(await limiter.consume(identity, 1), { allowed: true, remaining: LIMIT - 1 }, `node ${i + 1}: ${identity} decided`)
        t.same({ evalsha: calls.evalsha - before.evalsha, eval: calls.eval - before.eval }, { evalsha: 1, eval: 1 }, `node ${i + 1}: NOSCRIPT → one EVAL`)
        t.same(await Promise.all(admins.map((a) => a.script('EXISTS', DECIDE_SHA))), admins.map((_, j) => [j <= i ? 1 : 0]), `node ${i + 1} has the script now, the later ones not yet`)
      }
    }

    /** Every algorithm, exact: each identity gets LIMIT, then refusals; keys on all three masters. */
    async function exactEverywhere (t: Test, client: RedisBackendClient, prefix: string): Promise<void> {
      const backend = redisBackend({ client, prefix, timeoutMs: 5000, denyCache: false })
      const before = await serverNow(admins[0] as Redis)
      for (const algorithm of ALGORITHMS) {
        const limiter = backend.limiter(`app#${algorithm}`, policies[algorithm])
        const admitted = await Promise.all(identities.map(async (identity) => {
          let n = 0
          for (let i = 0; i < LIMIT + 3; i++) if ((await limiter.consume(identity, 1)).allowed) n++
          return n
        }))
        t.same(admitted, identities.map(() => LIMIT), `${algorithm}: exactly ${LIMIT} admitted for each of ${identities.length} identities`)
        const last = await limiter.consume(identities[0] as string, 1)
        t.match(last, { allowed: false, remaining: 0 }, `${algorithm}: then denied`)
        t.ok(last.allowed === false && last.retryAfterMs > 0, `${algorithm}: with a retry after`)
      }
      const after = await serverNow(admins[0] as Redis)
      t.equal(Math.floor(after / windowMs), Math.floor(before / windowMs), 'precondition: one window for the window algorithms')
      const perNode = await Promise.all(admins.map(async (admin) => (await keysUnder(admin, prefix)).length))
      t.ok(perNode.every((n) => n > 0), `keys on all three masters: ${perNode.join(' + ')}`)
      t.equal(perNode.reduce((a, b) => a + b, 0), ALGORITHMS.length * identities.length, 'one key per limiter and identity, each on one master')
      for (const [i, admin] of admins.entries()) {
        for (const key of await keysUnder(admin, prefix)) {
          const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', key))
          t.equal((await ownerOf(nodes, slot)).id, nodes[i]?.id, `${key}: slot ${slot} is served by the node holding it`)
        }
      }
    }

    await t.test('ioredis Cluster: NOSCRIPT on each fresh node (one EVAL there), then every algorithm exact', async (t) => {
      t.same(await Promise.all(admins.map((a) => a.script('EXISTS', DECIDE_SHA))), [[0], [0], [0]], 'no node has the script yet')
      const cluster = ioCluster([ports[0] as number])
      await cluster.connect()
      t.teardown(() => cluster.disconnect())
      const counted = counting(cluster)
      await firstUseOnEachNode(t, counted, counted.calls, 'first-io:')
      const before = { ...counted.calls }
      await exactEverywhere(t, counted, 'io:')
      t.same({ evalsha: counted.calls.evalsha - before.evalsha, eval: counted.calls.eval - before.eval },
        { evalsha: ALGORITHMS.length * (identities.length * (LIMIT + 3) + 1), eval: 0 }, 'then one EVALSHA per decision, no EVAL')
    })

    await t.test('node-redis createCluster: after SCRIPT FLUSH on every node, NOSCRIPT handled, every algorithm exact', async (t) => {
      for (const admin of admins) t.equal(await admin.script('FLUSH'), 'OK')
      const cluster = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${ports[0] as number}` }], defaults: { socket: { connectTimeout: 1000, reconnectStrategy: 50 } } })
      cluster.on('error', () => { /* reported as RATES_UNAVAILABLE */ })
      await cluster.connect()
      t.teardown(() => { cluster.destroy() })
      const calls = { evalsha: 0, eval: 0 }
      const counted = {
        evalSha (sha: string, options: NodeRedisScriptOptions) { calls.evalsha++; return cluster.evalSha(sha, options) },
        eval (script: string, options: NodeRedisScriptOptions) { calls.eval++; return cluster.eval(script, options) }
      }
      t.equal(redisBackend({ client: cluster }).clientShape, 'node-redis')
      t.same(await Promise.all(admins.map((a) => a.script('EXISTS', DECIDE_SHA))), [[0], [0], [0]], 'flushed')
      await firstUseOnEachNode(t, counted, calls, 'first-node:')
      const before = { ...calls }
      await exactEverywhere(t, counted, 'node:')
      t.same({ evalsha: calls.evalsha - before.evalsha, eval: calls.eval - before.eval },
        { evalsha: ALGORITHMS.length * (identities.length * (LIMIT + 3) + 1), eval: 0 }, 'then one EVALSHA per decision, no EVAL')
    })

    await t.test('leases on the cluster: two ioredis Clusters and a node-redis cluster on one hot identity', async (t) => {
      const io = [ioCluster([ports[0] as number]), ioCluster([ports[1] as number])]
      await Promise.all(io.map(async (cluster) => cluster.connect()))
      const node = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${ports[2] as number}` }], defaults: { socket: { connectTimeout: 1000, reconnectStrategy: 50 } } })
      node.on('error', () => { /* reported as RATES_UNAVAILABLE */ })
      await node.connect()
      t.teardown(() => {
        for (const cluster of io) cluster.disconnect()
        node.destroy()
      })
      const scriptCalls = async (): Promise<number> => {
        const stats = await Promise.all(admins.map(async (admin) => admin.info('commandstats')))
        return stats.flatMap((text) => [...text.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)]).reduce((sum, [, n]) => sum + Number(n), 0)
      }
      await leasesOnRealServers(t, [
        { name: 'ioredis Cluster 1', client: io[0] as Cluster },
        { name: 'ioredis Cluster 2', client: io[1] as Cluster },
        { name: 'node-redis cluster', client: node }
      ], { now: async () => serverNow(admins[0] as Redis), get: async (key) => (io[0] as Cluster).get(key), scriptCalls }, 'leases:')
    })

    await t.test('charges and a fleet\'s membership on the cluster, through ioredis and node-redis', async (t) => {
      const io = ioCluster([ports[0] as number])
      await io.connect()
      const node = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${ports[1] as number}` }], defaults: { socket: { connectTimeout: 1000, reconnectStrategy: 50 } } })
      node.on('error', () => { /* reported as RATES_UNAVAILABLE */ })
      await node.connect()
      t.teardown(() => {
        io.disconnect()
        node.destroy()
      })
      const policy = { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 10 } as const
      const [a, b] = [io, node].map((client) => redisBackend({ client, prefix: 'charge:', timeoutMs: 5000 })) as [ReturnType<typeof redisBackend>, ReturnType<typeof redisBackend>]
      const limiterA = a.limiter('app#tokens', policy)
      const limiterB = b.limiter('app#tokens', policy)
      for (const identity of ['tenant-1', 'tenant-2', 'tenant-3']) {
        t.match(await limiterA.consume(identity, 1), { allowed: true, remaining: 9 }, `${identity}: the estimate`)
        // The work took 15 units: 14 more than the estimate, a debt of 5 past empty.
        const charged = await limiterB.charge(identity, 14)
        t.match(charged, { allowed: false, remaining: 0 }, `${identity}: in debt, through the other client`)
        t.ok(charged.allowed === false && charged.retryAfterMs > 6 * 6000 - 1000 && charged.retryAfterMs <= 6 * 6000, `${identity}: refused until the debt and one token are repaid (${charged.allowed ? 0 : charged.retryAfterMs} ms)`)
        t.match(await limiterA.consume(identity, 1), { allowed: false }, `${identity}: the first client sees the debt`)
        t.match(await limiterA.charge(identity, -10), { allowed: true, remaining: 5 }, `${identity}: 10 units returned`)
        t.match(await limiterB.charge(identity, -10), { allowed: true, remaining: 10 }, `${identity}: 10 more, never beyond full`)
      }
      const slots = new Set(await Promise.all(['tenant-1', 'tenant-2', 'tenant-3'].map(async (identity) => String(await (admins[0] as Redis).call('CLUSTER', 'KEYSLOT', limiterA.keyOf(identity))))))
      t.ok(slots.size > 1, 'the identities sit on different slots')

      const members = [a.fleet('app', 30_000), b.fleet('app', 30_000)]
      const first = await members[0]!.refresh()
      const views = [first, await members[1]!.refresh(), await members[0]!.refresh()]
      t.same(views.map((view) => view.members), [1, 2, 2], 'one member, then two, as both clients see them')
      t.same([views[1]!.rank, views[2]!.rank].sort(), [0, 1], 'each its own rank')
      await members[1]!.leave()
      t.equal((await members[0]!.refresh()).members, 1, 'one left')
      await members[0]!.leave()
    })

    await t.test(`${PROCESSES} processes, each its own app and Cluster client: exactly the limit admitted per route`, async (t) => {
      const quotaWindow = windowAround(await serverNow(admins[0] as Redis), 60_000)
      const routes: Record<string, Policy> = Object.fromEntries(Object.entries(policiesFor(QUOTA, quotaWindow)).map(([name, policy]) => [`/${name}`, policy]))
      const started = performance.now()
      const launched = Array.from({ length: PROCESSES }, () => startChild(fileURLToPath(import.meta.url), { [CHILD]: '1', CLUSTER_PORTS: JSON.stringify(ports), CLUSTER_PREFIX: 'quota:', CLUSTER_ROUTES: JSON.stringify(routes) }))
      t.teardown(() => {
        killSpawned()
      })
      const children: Child[] = []
      for (const child of await Promise.allSettled(launched)) {
        if (child.status === 'fulfilled') children.push(child.value)
        else t.fail(`a child failed to start: ${(child.reason as Error).message}`)
      }
      if (children.length !== PROCESSES) return
      t.equal(new Set(children.map((c) => c.process.pid)).size, PROCESSES, `${PROCESSES} distinct processes listening (started in ${(performance.now() - started).toFixed(0)} ms)`)
      const appPorts = children.map((c) => c.port)
      for (const [path, policy] of Object.entries(routes)) {
        const before = await serverNow(admins[0] as Redis)
        const results = await hammer(appPorts, path, REQUESTS, CONCURRENCY)
        const after = await serverNow(admins[0] as Redis)
        if (policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window-counter') {
          t.equal(Math.floor(after / quotaWindow), Math.floor(before / quotaWindow), `${path}: precondition, one window`)
        }
        const statuses: Record<string, number> = {}
        for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1
        t.same(statuses, { 200: QUOTA, 429: REQUESTS - QUOTA }, `${path}: exactly ${QUOTA} of ${REQUESTS} admitted over ${PROCESSES} processes`)
        const perServer = appPorts.map((_, server) => results.filter((r) => r.server === server && r.status === 200).length)
        t.ok(perServer.filter((n) => n > 0).length >= 2, `${path}: admissions from several processes: ${perServer.join(' + ')}`)
      }
      const stats = await Promise.all(children.map(statsOf))
      const unavailable = stats.reduce((sum, s) => sum + s.unavailable, 0)
      t.equal(unavailable, 0, 'no decision failed')
      for (const child of children) child.process.send({ type: 'close' } satisfies ToChild)
      let timer: NodeJS.Timeout | undefined
      const codes = await Promise.race([
        Promise.all(children.map((c) => c.exited)),
        new Promise<string>((resolve) => { timer = setTimeout(() => resolve('timeout after 10 s'), 10_000) })
      ])
      clearTimeout(timer)
      t.same(codes, children.map(() => 0), `every child exited cleanly ${children.map((c) => c.output()).join('').trim()}`)
      const keys = (await Promise.all(admins.map((admin) => keysUnder(admin, 'quota:')))).flat()
      t.equal(keys.length, Object.keys(routes).length, 'one key per route, shared by all processes')
    })

    await t.test('a slot migrated to another master while decisions on it run: followed, exact', async (t) => {
      const policy: Policy = { algorithm: 'token-bucket', limit: QUOTA, windowMs: 3_600_000, burst: QUOTA }
      const cluster = ioCluster([ports[0] as number])
      await cluster.connect()
      t.teardown(() => cluster.disconnect())
      const limiter = redisBackend({ client: cluster, prefix: 'move:', timeoutMs: 5000, denyCache: false }).limiter('app#move', policy)
      const key = limiter.keyOf('mover')
      const admin = admins[0] as Redis
      const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', key))
      const source = await ownerOf(nodes, slot)
      const target = nodes.find((node) => node.id !== source.id) as Node
      // Half the quota before the move, so the key exists on the source and its state must travel.
      let admitted = 0
      let refused = 0
      for (let i = 0; i < QUOTA / 2; i++) if ((await limiter.consume('mover', 1)).allowed) admitted++
      t.equal(admitted, QUOTA / 2)
      t.equal((await keysUnder(source.server.admin, 'move:')).length, 1, 'the key is on the source')

      let moving = true
      const traffic = (async () => {
        const errors: string[] = []
        // On until the move is over and the quota is spent (bounded, should every decision fail).
        for (let i = 0; (moving || refused < 5) && i < 1000; i++) {
          const decision = await limiter.consume('mover', 1).catch((e: unknown) => { errors.push((e as Error).message); return undefined })
          if (decision?.allowed === true) admitted++
          else if (decision !== undefined) refused++
          // Paced, so that the move happens while units are still being admitted.
          await sleep(5)
        }
        return errors
      })()
      await sleep(20)
      const src = source.server.admin
      const dst = target.server.admin
      t.equal(await dst.call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', source.id), 'OK')
      t.equal(await src.call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', target.id), 'OK')
      await sleep(20)
      const inSlot = await src.call('CLUSTER', 'GETKEYSINSLOT', String(slot), '100') as string[]
      t.same(inSlot, [key], 'the one key of the slot')
      const beforeMigrate = admitted
      t.equal(await src.call('MIGRATE', '127.0.0.1', String(target.server.port), '', '0', '5000', 'KEYS', ...inSlot), 'OK')
      await sleep(20)
      for (const node of [target, source, ...nodes.filter((n) => n !== source && n !== target)]) {
        t.equal(await node.server.admin.call('CLUSTER', 'SETSLOT', String(slot), 'NODE', target.id), 'OK')
      }
      const beforeSetSlot = admitted
      await sleep(20)
      moving = false
      const errors = await traffic
      t.same(errors, [], 'no decision failed during the move')
      t.equal((await ownerOf(nodes, slot)).id, target.id, `slot ${slot} is now served by the target`)
      t.same(await keysUnder(dst, 'move:'), [key], 'the key (and its state) moved')
      t.same(await keysUnder(src, 'move:'), [], 'nothing left on the source')
      t.equal(admitted, QUOTA, `exactly ${QUOTA} admitted over the move (${refused} refused)`)
      t.comment(`admitted: ${QUOTA / 2} before the move, ${beforeMigrate} before MIGRATE, ${beforeSetSlot} before SETSLOT NODE, ${admitted} in all`)
      t.match(await limiter.consume('mover', 1), { allowed: false, remaining: 0 }, 'and the quota stays spent')
    })
  })
}
