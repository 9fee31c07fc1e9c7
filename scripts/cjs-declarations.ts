// After tsup: make dist/index.d.cts describe what `require('fastify-admission')` returns at run
// time. The CJS build's footer (tsup.config.ts) hands out the plugin itself with the named exports
// as properties, but tsup writes the CJS declarations as a copy of the ESM ones (a namespace
// object, no call signature), so `import admission = require('fastify-admission')` could not be
// registered. The Fastify convention describes that shape:
//
//   declare function fastifyAdmission(...args: Parameters<typeof admissionPlugin>): ReturnType<typeof admissionPlugin>;
//   declare namespace fastifyAdmission { export { ...every named export, `default` included } }
//   export = fastifyAdmission;
//
// The rewrite only accepts the shape it knows (a single `export { ... }` list ending the file, with
// a default export); anything else fails the build rather than publish declarations that lie.
import { readFileSync, writeFileSync } from 'node:fs'

const file = process.argv[2] ?? 'dist/index.d.cts'
const NAME = 'fastifyAdmission'

function fail (reason: string): never {
  console.error(`cjs-declarations: ${file}: ${reason}`)
  process.exit(1)
}

const text = readFileSync(file, 'utf8')
if (/^export\s*=/m.test(text)) fail('already has `export =` (run on a fresh tsup build)')
const exportLists = [...text.matchAll(/^export\s*\{([^}]*)\};?\s*$/gm)]
const last = exportLists[0]
if (exportLists.length !== 1 || last === undefined) fail(`expected one \`export { ... }\` list, found ${exportLists.length}`)
if (text.slice(last.index + last[0].length).trim() !== '') fail('the `export { ... }` list does not end the file')
if (/^export\s*\{[^}]*\}\s*from\b/m.test(text)) fail('a re-export (`export { X } from ...`) beside the final list: export the type from lib/index.ts only where it is used, or teach this script the shape')
if (/^export\s+(?!\{)/m.test(text)) fail('a top-level export other than the final list (`export declare`, `export *`, `export default`...)')
if (new RegExp(`\\b${NAME}\\b`).test(text)) fail(`the name ${NAME} is already used`)

const specifiers = last[1]!.split(',').map((s) => s.trim()).filter((s) => s !== '')
const defaults = specifiers.map((s) => /^(\w+)\s+as\s+default$/.exec(s)?.[1]).filter((s) => s !== undefined)
const plugin = defaults[0]
if (defaults.length !== 1 || plugin === undefined) fail('expected exactly one `X as default` in the export list')

const declarations = [
  '/** The plugin itself: `require(\'fastify-admission\')`, its named exports as properties (`.default` included). */',
  `declare function ${NAME}(...args: Parameters<typeof ${plugin}>): ReturnType<typeof ${plugin}>;`,
  `declare namespace ${NAME} {`,
  `    export { ${specifiers.join(', ')} };`,
  '}',
  `export = ${NAME};`,
  ''
].join('\n')

writeFileSync(file, text.slice(0, last.index) + declarations)
console.log(`cjs-declarations: ${file}: \`export = ${NAME}\` (the plugin ${plugin}, ${specifiers.length} named exports)`)
