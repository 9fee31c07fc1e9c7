// A process that takes `SLOTS` slots of client `x` at `ADDRESS` on the Redis at `REDIS_URL`, says
// so on stdout, and holds them (renewing) until it is killed. Not a test: client-slots.test.ts runs it.
import { Redis } from 'ioredis'
import { redisBackend } from '../../../lib/index.js'

const redis = new Redis(process.env.REDIS_URL!)
const book = redisBackend({ client: redis, prefix: process.env.PREFIX!, timeoutMs: 10_000 }).clientSlots!(process.env.ADDRESS!)
for (let i = 0; i < Number(process.env.SLOTS); i++) {
  if (!(await book.take('x', Number(process.env.SLOTS)))) throw new Error('a slot was refused')
}
process.stdout.write('holding\n')
setInterval(() => {}, 60_000)
