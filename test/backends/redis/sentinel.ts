// Replicated topologies of our own for the failover tests (failover.test.ts): a master with one
// replica watched by sentinels, and a cluster of three masters with one replica each. Every
// process is a redis-server on free ports (sentinels are the same binary with `--sentinel`, there
// being no redis-sentinel on PATH), with no persistence and a temporary directory; each is stopped
// by its pid at the test's teardown, and at the process's exit or on a signal should the test not
// get that far. Never the shared server. No tests here.
//
// Every wait polls for the condition the next step needs, with a deadline that only bounds a hang
// (a busy machine starts slowly): never a fixed sleep standing in for the condition.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { answersPing, freePort, run, startPrivateServer, type PrivateServer } from './helpers.js'

/** The master's name as the sentinels monitor it. */
export const MASTER_NAME = 'mymaster'

/** The processes of this module not stopped yet: killed at the process's exit (or on a signal). */
const running = new Set<() => void>()
let guarded = false

function killAtExit (kill: () => void): () => void {
  if (!guarded) {
    guarded = true
    process.once('exit', () => { for (const k of running) k() })
    // A signal (tap's timeout) ends the process without 'exit': stop ours, then end as the signal would.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.once(signal, () => {
        for (const k of running) k()
        if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
      })
    }
  }
  running.add(kill)
  return () => { running.delete(kill) }
}

/** A private server that is also killed at the process's exit, should no teardown run. */
async function guardedServer (extra: string[], port?: number): Promise<PrivateServer> {
  const server = await startPrivateServer(extra, port)
  const forget = killAtExit(server.kill)
  return {
    ...server,
    stop: async () => { forget(); await server.stop() },
    kill: () => { forget(); server.kill() }
  }
}

/**
 * Polls `probe` every 20 ms until it returns something other than undefined, and returns that.
 * `deadlineMs` only ends a hang (tap's timeout would too, with less to say): it throws with what
 * was awaited and the last observation `describe` gives.
 */
export async function waitFor<T> (what: string, deadlineMs: number, probe: () => Promise<T | undefined>, describe: () => string | Promise<string> = () => ''): Promise<T> {
  const end = performance.now() + deadlineMs
  let last = ''
  for (;;) {
    try {
      const found = await probe()
      if (found !== undefined) return found
    } catch (error) {
      last = (error as Error).message
    }
    if (performance.now() > end) throw new Error(`${what}: not within ${deadlineMs} ms (${last || await describe()})`)
    await sleep(20)
  }
}

/** `INFO <section>` as fields. */
export async function info (admin: Redis, section: string): Promise<Record<string, string>> {
  const text = await admin.info(section)
  return Object.fromEntries(text.split('\r\n').filter((line) => line.includes(':')).map((line) => {
    const at = line.indexOf(':')
    return [line.slice(0, at), line.slice(at + 1)]
  }))
}

/** A reply of the form [field, value, field, value …] (SENTINEL MASTER, REPLICAS …) as an object. */
function fields (flat: unknown): Record<string, string> {
  const list = flat as string[]
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i] as string] = list[i + 1] as string
  return out
}


export async function redisCliMissing (): Promise<string | false> {
  const { code, output } = await run('redis-cli', ['--version'])
  return code === 0 ? false : `redis-cli is not available (${output.trim()}); the cluster failover test needs it`
}

// A master with a full sync due starts it at once: the default diskless sync waits 5 s for more
// replicas to join first, which would be most of a test's time.
const REPLICATION_ARGS = ['--repl-diskless-sync-delay', '0']

export interface SentinelProcess {
  readonly port: number
  readonly pid: number
  /** A client for SENTINEL commands, connected. */
  readonly admin: Redis
  stop (): Promise<void>
}

/** A sentinel of our own on a free port: `redis-server <conf> --sentinel`, answering PING. */
async function startSentinel (masterPort: number, quorum: number, timing: SentinelTiming): Promise<SentinelProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'admission-sentinel-'))
  const port = await freePort()
  // The file must be writable: a sentinel rewrites its configuration as it learns the topology.
  const conf = join(dir, 'sentinel.conf')
  writeFileSync(conf, [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} ${quorum}`,
    `sentinel down-after-milliseconds ${MASTER_NAME} ${timing.downAfterMs}`,
    `sentinel failover-timeout ${MASTER_NAME} ${timing.failoverTimeoutMs}`,
    `sentinel parallel-syncs ${MASTER_NAME} 1`,
    ''
  ].join('\n'))
  const child: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const alive = (): boolean => child.exitCode === null && child.signalCode === null
  const admin = new Redis({ host: '127.0.0.1', port, lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null, enableReadyCheck: false })
  admin.on('error', () => { /* retried below; after a kill, nobody asks */ })
  const kill = (): void => {
    admin.disconnect()
    if (alive()) process.kill(child.pid as number, 'SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  const forget = killAtExit(kill)
  const stop = async (): Promise<void> => {
    forget()
    const was = alive()
    kill()
    if (was) await exited
  }
  await answersPing(admin, `the sentinel on port ${port}`, stop)
  return { port, pid: child.pid as number, admin, stop }
}

export interface SentinelTiming {
  /** Silence after which a sentinel holds the master down (SDOWN). */
  readonly downAfterMs: number
  /** A failover's time limit; a failed one is retried after twice this. */
  readonly failoverTimeoutMs: number
}

export interface SentinelSetOptions {
  readonly count: number
  readonly quorum: number
  readonly timing: SentinelTiming
  /**
   * The replica authenticates to the master as a user of its own (REPLICATION_USER), so that
   * `cutReplication()` can keep it out.
   */
  readonly cuttable?: boolean
}

/** The user a cuttable replica replicates as. */
const REPLICATION_USER = 'replication'
const REPLICATION_PASSWORD = 'replication-secret'

export interface SentinelSet {
  readonly master: PrivateServer
  readonly replica: PrivateServer
  readonly sentinels: readonly SentinelProcess[]
  /**
   * A client of the replica that reconnects (the replica's `admin` does not): a sentinel that
   * promotes an instance ends all its normal clients (CLIENT KILL TYPE normal), so that they
   * reconnect to whichever master the sentinels now name.
   */
  readonly replicaClient: Redis
  /**
   * Cuts the replica off (a cuttable set only): its user disabled on the master, its link killed,
   * so that it cannot sync again; resolves once the replica reports its link down. The writes
   * from then on reach the master only — the replica's copy grows older, as under a replication
   * lag, but deterministically.
   */
  cutReplication (): Promise<void>
  /** Resolves once the replica has applied every write the master had when called. */
  synced (): Promise<void>
  /** The master's port as the sentinel `i` names it (SENTINEL get-master-addr-by-name). */
  masterPortSeenBy (i: number): Promise<number | undefined>
}

/**
 * A master, one replica of it (in sync), and `count` sentinels with `quorum`, each of which knows
 * the master, the replica (link ok) and every other sentinel — what a failover needs, so a test
 * can kill the master at once.
 */
export async function startSentinelSet (teardown: (fn: () => Promise<void>) => void, options: SentinelSetOptions): Promise<SentinelSet> {
  const { count, quorum, timing } = options
  const servers: PrivateServer[] = []
  const sentinels: SentinelProcess[] = []
  let replicaClient: Redis | undefined
  teardown(async () => {
    replicaClient?.disconnect()
    for (const sentinel of sentinels) await sentinel.stop()
    for (const server of servers) await server.stop()
  })
  const master = await guardedServer(REPLICATION_ARGS)
  servers.push(master)
  if (options.cuttable === true) {
    await master.admin.call('ACL', 'SETUSER', REPLICATION_USER, 'on', `>${REPLICATION_PASSWORD}`, '~*', '&*', '+@all')
  }
  const auth = options.cuttable === true ? ['--masteruser', REPLICATION_USER, '--masterauth', REPLICATION_PASSWORD] : []
  const replica = await guardedServer([...REPLICATION_ARGS, ...auth, '--replicaof', '127.0.0.1', String(master.port)])
  servers.push(replica)
  const watch = new Redis({ host: '127.0.0.1', port: replica.port, connectTimeout: 500, maxRetriesPerRequest: 1, retryStrategy: () => 20 })
  replicaClient = watch
  watch.on('error', () => { /* reconnects; a command it failed is retried by the poll */ })
  await waitFor('the replica in sync with the master', 15_000, async () => (await info(replica.admin, 'replication')).master_link_status === 'up' || undefined)
  for (let i = 0; i < count; i++) sentinels.push(await startSentinel(master.port, quorum, timing))

  const masterPortSeenBy = async (i: number): Promise<number | undefined> => {
    const address = await (sentinels[i] as SentinelProcess).admin.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME) as [string, string] | null
    return address === null ? undefined : Number(address[1])
  }
  // The sentinels find the replica in the master's INFO and each other by their hello messages
  // (every 2 s): until each knows all, a failover could lack its quorum or its replica.
  const describe = async (): Promise<string> => JSON.stringify(await Promise.all(sentinels.map(async (s) => fields(await s.admin.call('SENTINEL', 'MASTER', MASTER_NAME)))))
  await waitFor('every sentinel knowing the master, the replica and the other sentinels', 15_000, async () => {
    for (const sentinel of sentinels) {
      const seen = fields(await sentinel.admin.call('SENTINEL', 'MASTER', MASTER_NAME))
      if (seen.flags !== 'master' || Number(seen['num-slaves']) !== 1 || Number(seen['num-other-sentinels']) !== count - 1) return undefined
      const replicas = (await sentinel.admin.call('SENTINEL', 'REPLICAS', MASTER_NAME) as unknown[]).map(fields)
      if (replicas.length !== 1 || replicas[0]?.flags !== 'slave' || replicas[0]['master-link-status'] !== 'ok') return undefined
    }
    return true
  }, describe)
  const link = async (): Promise<string | undefined> => (await info(watch, 'replication')).master_link_status
  return {
    master,
    replica,
    sentinels,
    replicaClient: watch,
    masterPortSeenBy,
    async cutReplication () {
      if (options.cuttable !== true) throw new Error('this set was not started cuttable')
      await master.admin.call('ACL', 'SETUSER', REPLICATION_USER, 'off')
      await master.admin.call('CLIENT', 'KILL', 'USER', REPLICATION_USER)
      await waitFor('the replica cut off from the master', 10_000, async () => (await link()) === 'down' || undefined)
    },
    async synced () {
      const offset = Number((await info(master.admin, 'replication')).master_repl_offset)
      await waitFor('the replica in sync', 10_000, async () => Number((await info(watch, 'replication')).master_repl_offset) >= offset || undefined)
    }
  }
}

/** One line of CLUSTER NODES. */
export interface ClusterLine {
  readonly id: string
  readonly port: number
  readonly flags: readonly string[]
  /** The master's id for a replica, '-' for a master. */
  readonly masterId: string
  readonly slots: ReadonlyArray<readonly [number, number]>
}

/** CLUSTER NODES as one node sees it. */
export async function clusterView (admin: Redis): Promise<ClusterLine[]> {
  const text = String(await admin.call('CLUSTER', 'NODES'))
  return text.trim().split('\n').map((line) => {
    const [id, address, flags, masterId, , , , , ...ranges] = line.split(' ')
    const slots = ranges.filter((r) => !r.startsWith('[')).map((r) => {
      const [from, to = from] = r.split('-').map(Number) as [number, number?]
      return [from, to as number] as const
    })
    return { id: id as string, port: Number((address as string).split('@')[0]?.split(':')[1]), flags: (flags as string).split(','), masterId: masterId as string, slots }
  })
}

export interface ClusterNode {
  readonly server: PrivateServer
  readonly id: string
}

export interface ReplicatedCluster {
  readonly nodes: readonly ClusterNode[]
  /** The node serving `slot` as `view` (one node's CLUSTER NODES) has it, with its replica. */
  ownerOf (view: readonly ClusterLine[], slot: number): { master: ClusterNode, replica: ClusterNode }
}

/**
 * Three masters, each with one replica in sync (redis-cli --cluster create --cluster-replicas 1),
 * on which every node agrees: cluster_state:ok, three masters holding all slots, three replicas
 * each following one of them.
 */
export async function startReplicatedCluster (teardown: (fn: () => Promise<void>) => void, nodeTimeoutMs: number): Promise<ReplicatedCluster> {
  const servers: PrivateServer[] = []
  teardown(async () => { for (const server of servers) await server.stop() })
  for (let i = 0; i < 6; i++) {
    const port = await freePort()
    // The cluster bus on a free port of its own (the default, port + 10 000, may be taken).
    const bus = await freePort()
    servers.push(await guardedServer([...REPLICATION_ARGS, '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-port', String(bus), '--cluster-node-timeout', String(nodeTimeoutMs)], port))
  }
  // All on one host: redis-cli warns that replicas share their master's host, and goes on.
  const created = await run('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '1', '--cluster-yes'])
  if (created.code !== 0) throw new Error(`redis-cli --cluster create failed (${created.code}): ${created.output}`)
  const nodes = await Promise.all(servers.map(async (server) => ({ server, id: String(await server.admin.call('CLUSTER', 'MYID')) })))
  const byId = new Map(nodes.map((node) => [node.id, node]))
  const agreed = (view: ClusterLine[]): boolean => {
    const masters = view.filter((l) => l.flags.includes('master') && !l.flags.some((f) => f.startsWith('fail')) && l.slots.length > 0)
    const replicas = view.filter((l) => l.flags.includes('slave') && masters.some((m) => m.id === l.masterId))
    return masters.length === 3 && replicas.length === 3 && new Set(replicas.map((r) => r.masterId)).size === 3
  }
  await waitFor('every node at cluster_state:ok, seeing three masters with a replica each', 20_000, async () => {
    for (const { server } of nodes) {
      if ((await info(server.admin, 'cluster')).cluster_enabled !== '1') return undefined
      if (!/cluster_state:ok/.test(String(await server.admin.call('CLUSTER', 'INFO')))) return undefined
      if (!agreed(await clusterView(server.admin))) return undefined
    }
    return true
  }, async () => (await clusterView(servers[0]?.admin as Redis)).map((l) => `${l.port} ${l.flags.join(',')} ${l.masterId}`).join('; '))
  const view = await clusterView(servers[0]?.admin as Redis)
  const replicas = nodes.filter((node) => view.find((l) => l.id === node.id)?.flags.includes('slave'))
  await waitFor('every replica in sync with its master', 15_000, async () => {
    for (const { server } of replicas) if ((await info(server.admin, 'replication')).master_link_status !== 'up') return undefined
    return true
  })
  return {
    nodes,
    ownerOf (lines, slot) {
      const owner = lines.find((l) => l.flags.includes('master') && l.slots.some(([from, to]) => slot >= from && slot <= to))
      if (owner === undefined) throw new Error(`no master serves slot ${slot}`)
      const follower = lines.find((l) => l.masterId === owner.id)
      const master = byId.get(owner.id)
      const replica = follower === undefined ? undefined : byId.get(follower.id)
      if (master === undefined || replica === undefined) throw new Error(`slot ${slot}: its master ${owner.id} has no replica of ours`)
      return { master, replica }
    }
  }
}
