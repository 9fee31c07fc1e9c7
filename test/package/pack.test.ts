import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

// What `npm publish` would ship, as `npm pack --dry-run` lists it (on the build `npm test` made):
// the license, the readme, package.json and the build, with every file the `exports` map names;
// no sources, tests or tooling.

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
  t.same(files.filter((file) => !file.startsWith('dist/') && !['LICENSE', 'README.md', 'package.json'].includes(file)), [])
})
