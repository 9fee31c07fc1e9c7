import { defineConfig } from 'tsup'

export default defineConfig({
  entry: { index: 'lib/index.ts', 'core/index': 'lib/core/index.ts', 'client/index': 'lib/client/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  target: 'node20',
  sourcemap: true,
  splitting: true,
  // `require('fastify-admission')` hands out the plugin itself, its named exports as properties
  // (`.default` included), as Fastify plugins conventionally do. Only the main entry: the core
  // and the client have no default export.
  footer: ({ format }) => (format === 'cjs' ? { js: 'if (typeof exports.default === "function") module.exports = Object.assign(exports.default, exports)' } : {})
})
