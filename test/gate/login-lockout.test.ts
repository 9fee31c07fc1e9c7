// Account lockout under login throttling, and the remedy of the login guide: a strict quota per
// address and a looser one per account, two registrations on one route. An attacker at one address
// cannot lock the owner out; the per-account quota still bounds guessers spread over many addresses.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import admission, { AdmissionOptionError, memoryBackend } from '../../lib/index.js'
import { manualClock } from './limits-backends.js'

const WINDOW = 15 * 60_000
const PER_ADDRESS = 3
const PER_ACCOUNT = 10

const account = (request: FastifyRequest): string => `user:${String((request.body as { user?: unknown } | undefined)?.user ?? '')}`
const wrongPassword = (_request: FastifyRequest, reply: { statusCode: number }): boolean => reply.statusCode === 401

function declareLogin (app: FastifyInstance): void {
  app.post('/login', { config: { admission: { count: 'failures', failed: wrongPassword } } }, async (request, reply) => {
    const { password } = request.body as { password: string }
    return password === 'secret' ? { ok: true } : await reply.code(401).send({ error: 'wrong password' })
  })
}

/** Login throttling keyed by account alone: the lockout. */
async function byAccount (t: Test, clock: () => number): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: memoryBackend({ clock }),
    rateLimit: { algorithm: 'fixed-window', limit: PER_ADDRESS, windowMs: WINDOW },
    key: account,
    hook: 'preHandler'
  })
  declareLogin(app)
  return app
}

/** The guide's remedy: per address (onRequest) and, inside, per account (preHandler, looser); the app, and the inner context as `accounts`. */
async function byAddressAndAccount (t: Test, clock: () => number): Promise<FastifyInstance & { accounts: FastifyInstance }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: { algorithm: 'fixed-window', limit: PER_ADDRESS, windowMs: WINDOW } })
  let inner: FastifyInstance | undefined
  await app.register(async (accounts: FastifyInstance) => {
    await accounts.register(admission, { backend: memoryBackend({ clock }), rateLimit: { algorithm: 'fixed-window', limit: PER_ACCOUNT, windowMs: WINDOW }, key: account, hook: 'preHandler' })
    declareLogin(accounts)
    inner = accounts
  })
  return Object.assign(app as FastifyInstance, { accounts: inner! })
}

async function login (app: FastifyInstance, from: string, password: string, user = 'ann'): Promise<number> {
  return (await app.inject({ method: 'POST', url: '/login', remoteAddress: from, payload: { user, password } })).statusCode
}

t.test('keyed by account alone, wrong guesses from one address lock the owner out everywhere', async (t) => {
  const app = await byAccount(t, manualClock().now)
  for (let i = 0; i < PER_ADDRESS; i++) t.equal(await login(app, '203.0.113.9', 'guess'), 401)
  t.equal(await login(app, '198.51.100.7', 'secret'), 429, 'the owner, from home, with the right password: refused for the window')
})

t.test('per address and per account: one address cannot lock the owner out', async (t) => {
  const clock = manualClock()
  const app = await byAddressAndAccount(t, clock.now)
  for (let i = 0; i < PER_ADDRESS; i++) t.equal(await login(app, '203.0.113.9', 'guess'), 401)
  for (let i = 0; i < 20; i++) t.equal(await login(app, '203.0.113.9', 'guess'), 429, 'the attacker\'s address is refused')
  t.equal(await login(app, '198.51.100.7', 'secret'), 200, 'the owner, from another address, logs in')
  t.equal(await login(app, '203.0.113.9', 'secret', 'bob'), 429, 'the attacker\'s address is refused for every account')
  t.match(app.admission.stats().routes['POST /login'], { admitted: PER_ADDRESS + 1, limited: 21 })
})

t.test('per address and per account: a guesser spread over many addresses is bounded per account', async (t) => {
  const clock = manualClock()
  const app = await byAddressAndAccount(t, clock.now)
  let guesses = 0
  for (let address = 1; address <= 2 * PER_ACCOUNT; address++) {
    for (let i = 0; i < PER_ADDRESS; i++) if (await login(app, `192.0.2.${address}`, 'guess') === 401) guesses++
  }
  t.equal(guesses, PER_ACCOUNT, `${2 * PER_ACCOUNT} addresses, ${PER_ADDRESS} tries each: ${PER_ACCOUNT} guesses at the password in the window`)
  t.equal(await login(app, '198.51.100.7', 'secret'), 429, 'the account itself is refused now: the per-account limit is also what a lockout costs')
  t.equal(await login(app, '198.51.100.7', 'secret', 'bob'), 200, 'other accounts are not')
  t.equal(await app.accounts.admission.registryOf('POST /login')!.delete('user:ann'), true, 'a password reset starts the account afresh')
  t.equal(await login(app, '198.51.100.7', 'secret'), 200)
  clock.advance(WINDOW)
  t.equal(await login(app, '198.51.100.7', 'secret'), 200, 'the next window')
})

t.test('an enclosing registration without a rate limit refuses the route\'s count: \'failures\'', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, maxInFlight: 100 })
  await app.register(async (accounts) => {
    await accounts.register(admission, { rateLimit: { algorithm: 'fixed-window', limit: PER_ACCOUNT, windowMs: WINDOW }, key: account, hook: 'preHandler' })
    declareLogin(accounts)
  })
  await t.rejects(async () => { await app.ready() }, AdmissionOptionError)
})

t.test('one registration\'s refusal is no failed login for another: the default failed() (any 4xx) counts only the route\'s own answers', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const clock = manualClock().now
  // Per address, with the default failed() (any 4xx); inside, per account, one failure a window.
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: WINDOW } })
  await app.register(async (accounts: FastifyInstance) => {
    await accounts.register(admission, { backend: memoryBackend({ clock }), rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: WINDOW }, key: account, hook: 'preHandler' })
    accounts.post('/login', { config: { admission: { count: 'failures' } } }, async (request, reply) => {
      const { password } = request.body as { password: string }
      return password === 'secret' ? { ok: true } : await reply.code(401).send({ error: 'wrong password' })
    })
  })
  const from = '203.0.113.9'
  t.equal(await login(app, from, 'guess'), 401, 'one wrong guess for ann: a failure for the address and for the account')
  t.equal(await login(app, from, 'guess'), 429, 'ann\'s account is refused by the inner registration')
  t.equal(await login(app, from, 'guess'), 429)
  t.equal(await login(app, from, 'secret', 'bob'), 200, 'the address has used one failure of three: bob logs in from it')
})
