'use strict'
// Preloaded (`node --require`) into a run of Fastify's own test files: every Fastify instance they
// create registers fastify-admission (the built package) at once, without `await`, with limits
// nothing reaches and no headers (the headers are the plugin's output; what is compared is
// everything else). A test that behaves otherwise with it than without it is a place where the
// plugin is not transparent to Fastify.
//
// Fastify is wrapped when a test first loads it, not before: some tests stub Fastify's internal
// modules before they load Fastify, and a Fastify loaded early would not see their stubs.
const Module = require('node:module')
const fastifyPath = require.resolve('fastify')
const options = {
  rateLimit: { limit: 1_000_000_000, windowMs: 60_000 },
  maxInFlight: 1_000_000,
  headers: false
}

const load = Module._load
Module._load = function loadWithAdmission (request, parent, isMain) {
  const exported = load.apply(this, arguments)
  if (Module._resolveFilename(request, parent, isMain) !== fastifyPath || exported.admissionWrapped) return exported
  const admission = require('../../dist/index.cjs')
  const plugin = admission.default ?? admission
  function withAdmission (...args) {
    const app = exported(...args)
    app.register(plugin, options)
    return app
  }
  Object.assign(withAdmission, exported)
  withAdmission.default = withAdmission
  withAdmission.fastify = withAdmission
  withAdmission.admissionWrapped = true
  require.cache[fastifyPath].exports = withAdmission
  return withAdmission
}
