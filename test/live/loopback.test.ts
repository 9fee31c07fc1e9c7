// Without `auth`, the live page is for whoever can reach loopback: the server refuses to start on
// any other address, before anything is bound, with an error naming `live.auth` and the fix; with
// `auth`, it listens wherever it is told. Real sockets, ports chosen by the system.
import t from 'tap'
import Fastify from 'fastify'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import admission from '../../lib/index.js'
import { isLoopback, listenHost, loopbackHost } from '../../lib/live/loopback.js'

const REFUSED = { name: 'AdmissionOptionError', code: 'ADMISSION_INVALID_OPTION', path: 'live.auth', message: /give live\.auth, or listen on 127\.0\.0\.1, ::1 or localhost only/ }

t.test('listen() on every IPv4 address without auth is refused, nothing bound, and the page never served', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: true })
  const error = await app.listen({ port: 0, host: '0.0.0.0' }).then(() => undefined, (e: unknown) => e)
  t.match(error, { ...REFUSED, message: /listen\(\) was asked for "0\.0\.0\.0"; the live page at \/admission\/live/ })
  t.equal(app.server.listening, false, 'no socket bound')
  t.same(app.addresses(), [])
})

t.test('the callback form of listen() is told the same error', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: { path: '/ops/live' } })
  await app.ready()
  const error = await new Promise((resolve) => { app.listen({ port: 0, host: '::' }, (err) => { resolve(err) }) })
  t.match(error, { ...REFUSED, message: /"::".*\/ops\/live/ })
})

t.test('the server\'s own listen() without a host (every address) is refused on its error event', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: true })
  await app.ready()
  app.server.listen(0)
  const [error] = await once(app.server, 'error')
  t.match(error, { ...REFUSED, message: /every address, a pipe or a handle \(no host given\)/ })
  t.equal(app.server.listening, false)
})

t.test('loopback binds start: 127.0.0.1, localhost (Fastify\'s default), a port and host given apart', async (t) => {
  for (const host of ['127.0.0.1', 'localhost', undefined]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { live: true })
    app.get('/', async () => 'ok')
    const url = await app.listen({ port: 0, ...(host === undefined ? {} : { host }) })
    t.ok(app.addresses().every((a) => isLoopback((a as AddressInfo).address)), `${String(host)}: ${app.addresses().map((a) => (a as AddressInfo).address).join(', ')}`)
    const res = await fetch(`${url}/admission/live/data`)
    t.equal(res.status, 200, 'the data answers on loopback')
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: true })
  await app.ready()
  app.server.listen(0, '127.0.0.1')
  await once(app.server, 'listening')
  t.equal((app.server.address() as AddressInfo).address, '127.0.0.1', 'listen(port, host)')
})

t.test('with auth the server listens wherever it is told', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: { auth: () => true } })
  await app.listen({ port: 0, host: '0.0.0.0' })
  t.same(app.addresses().map((a) => (a as AddressInfo).address), ['0.0.0.0'])
  const { port } = app.server.address() as AddressInfo
  const res = await fetch(`http://127.0.0.1:${port}/admission/live/data`)
  t.equal(res.status, 200)
})

t.test('what counts as loopback', async (t) => {
  for (const address of ['127.0.0.1', '127.9.8.7', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) t.ok(isLoopback(address), address)
  for (const address of ['0.0.0.0', '::', '10.0.0.1', '::ffff:10.0.0.1', '128.0.0.1', 'localhost', '']) t.notOk(isLoopback(address), address)
  t.ok(loopbackHost('localhost'))
  t.ok(loopbackHost('LocalHost'))
  t.notOk(loopbackHost('example.test'), 'a name other than localhost: what it resolves to is not known when it binds')
  t.notOk(loopbackHost(undefined), 'no host: every address')
})

t.test('the host a call of listen() binds, as Node reads its arguments', async (t) => {
  t.equal(listenHost([{ port: 0, host: '127.0.0.1' }]), '127.0.0.1')
  t.equal(listenHost([{ port: 0 }]), undefined, 'no host: every address')
  t.equal(listenHost([{ path: '/tmp/x.sock' }]), undefined, 'a pipe')
  t.equal(listenHost([{ fd: 3 }]), undefined, 'a file descriptor')
  t.equal(listenHost([{ handle: {} }]), undefined, 'a handle')
  t.equal(listenHost([{ _handle: {} }]), undefined, 'a handle, as Node names it inside')
  t.equal(listenHost([{ port: 0, host: 7 }]), undefined, 'a host that is no string')
  t.equal(listenHost([3000, '::1']), '::1')
  t.equal(listenHost(['3000', '::1']), '::1', 'a port as a string')
  t.equal(listenHost([3000]), undefined)
  t.equal(listenHost([3000, () => {}]), undefined, 'a port and a callback')
  t.equal(listenHost(['/tmp/x.sock']), undefined, 'a pipe by its path')
  t.equal(listenHost([null]), undefined)
})
