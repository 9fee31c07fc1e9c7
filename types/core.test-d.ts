import { take, newBucket, limitConfig, acquire, release, ipKey, rejection503, LIM_ERR_PARAM, type Take, type LimitConfig } from 'fastify-admission/core'

const config: LimitConfig = limitConfig(10, 1, 100, 4)
const result: Take = take(newBucket(config.capacity, 0), config, 50, 1)
const ok: boolean = result.ok
const status: 503 = rejection503(2).status
const body: 'lim rejected' = rejection503(2).body
const n: number = release(acquire(0, 4).n)
const key: number = ipKey('127.0.0.1')
const code: 1 = LIM_ERR_PARAM
void ok; void status; void body; void n; void key; void code
// @ts-expect-error `ok` is a boolean, not the seed's 0/1
const asNumber: number = result.ok
void asNumber
// @ts-expect-error state is read-only
result.tokens = 3
