// Leases on a real Redis (the tests' own server, or REDIS_URL's): three ioredis and two
// node-redis clients on one hot identity (lease-run.ts).
import t from 'tap'
import { createClient } from 'redis'
import { leasesOnRealServers } from './lease-run.js'
import { deleteKeys, sharedRedis, testClient, uniquePrefix } from './helpers.js'

const shared = await sharedRedis()

t.test('leases on one Redis, through ioredis and node-redis', { skip: 'skip' in shared ? shared.skip : false }, async (t) => {
  if ('skip' in shared) return
  const { redis, url } = shared
  const prefix = uniquePrefix('leases')
  const io = [testClient(url), testClient(url), testClient(url)]
  await Promise.all(io.map(async (client) => client.connect()))
  const node = [createClient({ url }), createClient({ url })]
  await Promise.all(node.map(async (client) => client.connect()))
  t.teardown(async () => {
    await deleteKeys(redis, prefix)
    for (const client of io) client.disconnect()
    for (const client of node) client.destroy()
    redis.disconnect()
  })
  const calls = async (): Promise<number> => {
    const stats = await redis.info('commandstats')
    return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, [, n]) => sum + Number(n), 0)
  }
  await leasesOnRealServers(t, [
    ...io.map((client, i) => ({ name: `ioredis ${i + 1}`, client })),
    ...node.map((client, i) => ({ name: `node-redis ${i + 1}`, client }))
  ], {
    now: async () => { const [s, us] = await redis.time(); return Number(s) * 1000 + Math.floor(Number(us) / 1000) },
    get: async (key) => redis.get(key),
    scriptCalls: calls
  }, prefix)
})
