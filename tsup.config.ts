import { defineConfig } from 'tsup'

export default defineConfig({
  entry: { index: 'lib/index.ts', 'core/index': 'lib/core/index.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  target: 'node20',
  sourcemap: true,
  // The CJS build must hand `require('fastify-admission')` the plugin itself (with named
  // exports as properties), as Fastify plugins conventionally do.
  cjsInterop: true,
  splitting: true
})
