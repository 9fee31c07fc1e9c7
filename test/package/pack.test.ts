import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

// What `npm publish` would ship, as `npm pack --dry-run` lists it (on the build `npm test` made):
// the license, the readme, package.json, the build, with every file the `exports` map names, and
// the documentation (docs/), where the messages and the declarations point; no sources, tests or
// tooling.

const listing = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { encoding: 'utf8' })) as Array<{ files: Array<{ path: string }> }>
const files = listing[0]!.files.map(({ path }) => path)

t.test('the license, the readme and package.json are in the package', async (t) => {
  for (const file of ['LICENSE', 'README.md', 'package.json']) t.ok(files.includes(file), file)
  t.match(readFileSync('LICENSE', 'utf8'), /^MIT License\n\nCopyright \(c\) 2026 the fastify-admission authors\n/)
})

t.test('every file the exports map names is in the package, and nothing but dist/ besides', async (t) => {
  const manifest = JSON.parse(readFileSync('package.json', 'utf8')) as { main: string, module: string, types: string, exports: unknown }
  const named = new Set<string>([manifest.main, manifest.module, manifest.types])
  const walk = (value: unknown): void => {
    if (typeof value === 'string') named.add(value)
    else if (typeof value === 'object' && value !== null) Object.values(value).forEach(walk)
  }
  walk(manifest.exports)
  for (const file of named) t.ok(files.includes(file.replace(/^\.\//, '')), file)
  t.same(files.filter((file) => !file.startsWith('dist/') && !file.startsWith('docs/') && !['LICENSE', 'README.md', 'package.json'].includes(file)), [])
})

t.test('the documentation ships: every page of docs/', async (t) => {
  const pages = (readdirSync('docs', { recursive: true }) as string[]).filter((file) => file.endsWith('.md')).map((file) => join('docs', file))
  t.ok(pages.length > 10, `${pages.length} pages`)
  t.same(pages.filter((page) => !files.includes(page)), [], 'none left out')
})

t.test('every docs page the shipped code names (its messages, its declarations) is a file of the package', async (t) => {
  // The build's code and declarations, as installed (source maps carry the sources' comments: not shipped text a user reads).
  const shipped = files.filter((file) => file.startsWith('dist/') && !file.endsWith('.map'))
  const named = new Set<string>()
  for (const file of shipped) {
    for (const match of readFileSync(file, 'utf8').matchAll(/docs\/[\w/.-]*?\.md\b/g)) named.add(match[0])
  }
  t.ok(named.has('docs/migration/rate-limit.md'), 'the messages name the migration guide')
  for (const page of named) t.ok(files.includes(page), `${page} ships`)
})
