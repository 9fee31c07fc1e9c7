import t from 'tap'
import ts from 'typescript'
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

// The documentation's TypeScript compiles as written, against the built package as a consumer sees it.
//
// - Every block fenced ```ts (or ```typescript) in README.md, CONTRIBUTING.md and docs/**/*.md is
//   checked; a block that is not meant to compile takes another language (```js, ```text).
// - Each block is a module of its own (`<file>-<line>.ts`, `export {}` appended, in a consumer project: a temporary
//   directory whose package.json says "type": "module", with `fastify-admission` linked in its
//   node_modules as if installed, beside links to this repository's dependencies), type-checked
//   strictly under module nodenext and node16 on the build `npm test` made.
// - What a block takes for granted (the `app` it registers on, a `handler`, an auth plugin's
//   `request.user`) goes in a hidden prelude, an HTML comment right before the block's fence:
//     <!-- prelude: declare const app: import('fastify').FastifyInstance -->
//   Its text (any number of lines) is put before the block's, in the same module. It should only
//   declare, never do, what the block assumes.
// - An error is reported at its file and line (or as in the prelude of the block at that line).

interface Block { source: string, line: number, code: string, prelude: string }

const PRELUDE = /^<!--\s*prelude:([\s\S]*?)-->\s*$/

/** README.md, CONTRIBUTING.md and every page under docs/, as paths from the repository's root. */
function documents (): string[] {
  const pages = (readdirSync('docs', { recursive: true }) as string[])
    .map((file) => join('docs', String(file)))
    .filter((file) => file.endsWith('.md'))
    .sort()
  return ['README.md', 'CONTRIBUTING.md', ...pages]
}

function blocks (source: string, markdown: string): Block[] {
  const lines = markdown.split('\n')
  const found: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i]!)) continue
    const end = lines.findIndex((line, j) => j > i && line.startsWith('```'))
    if (end === -1) throw new Error(`${source}:${i + 1}: a \`\`\`ts block that never closes`)
    const before = lines.slice(0, i).join('\n')
    const comment = before.slice(Math.max(0, before.lastIndexOf('<!--')))
    found.push({ source, line: i + 1, code: lines.slice(i + 1, end).join('\n') + '\n', prelude: PRELUDE.exec(comment)?.[1]?.trim() ?? '' })
    i = end
  }
  return found
}

/** A consumer project: the package as an installed dependency, its dependencies beside it. */
function consumer (): string {
  const dir = mkdtempSync(join(tmpdir(), 'fastify-admission-readme-'))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'readme-consumer', private: true, type: 'module' }))
  const modules = join(dir, 'node_modules')
  mkdirSync(modules)
  symlinkSync(resolve('.'), join(modules, 'fastify-admission'), 'dir')
  for (const entry of readdirSync('node_modules')) {
    if (entry.startsWith('.') || entry === 'fastify-admission') continue
    symlinkSync(resolve('node_modules', entry), join(modules, entry), 'dir')
  }
  return dir
}

const sources = documents()
const texts = new Map(sources.map((source) => [source, readFileSync(source, 'utf8')]))
const found = sources.flatMap((source) => blocks(source, texts.get(source)!))

t.test('the documentation has TypeScript blocks, and every one is found', async (t) => {
  t.ok(found.filter(({ source }) => source === 'README.md').length > 0, 'the README has some')
  t.ok(found.some(({ source }) => source.startsWith('docs')), 'docs/ has some')
  for (const [source, markdown] of texts) {
    // An indented fence (in a list) would be skipped by the reader above: it counts here, and fails.
    const fences = markdown.split('\n').filter((line) => /^\s*```(ts|typescript)\b/.test(line)).length
    t.equal(found.filter((block) => block.source === source).length, fences, `every \`\`\`ts fence of ${source} opens a block read here`)
  }
})

const dir = consumer()
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const files = found.map((block) => {
  const file = join(dir, `${block.source.replace(/[^A-Za-z0-9]+/g, '-')}-${block.line}.ts`)
  writeFileSync(file, `${block.prelude === '' ? '' : `${block.prelude}\n`}${block.code}export {}\n`)
  return { file, block, preludeLines: block.prelude === '' ? 0 : block.prelude.split('\n').length }
})

// Every block under NodeNext; the README's, what most readers copy, under Node16 too (the package's
// types under both are checked by `npm run typecheck`: types/tsconfig.node16.json).
for (const [name, module, moduleResolution, checked] of [
  ['nodenext', ts.ModuleKind.NodeNext, ts.ModuleResolutionKind.NodeNext, files],
  ['node16', ts.ModuleKind.Node16, ts.ModuleResolutionKind.Node16, files.filter(({ block }) => block.source === 'README.md')]
] as const) {
  t.test(`every block type-checks (module ${name}${name === 'node16' ? ', the README\'s' : ''})`, async (t) => {
    const files = checked
    const program = ts.createProgram(files.map(({ file }) => file), {
      target: ts.ScriptTarget.ES2022,
      module,
      moduleResolution,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      typeRoots: [join(dir, 'node_modules', '@types')]
    })
    const diagnostics = ts.getPreEmitDiagnostics(program)
    for (const { file, block, preludeLines } of files) {
      const own = diagnostics.filter((d) => d.file !== undefined && resolve(d.file.fileName) === resolve(file))
      const where = (d: ts.Diagnostic): string => {
        const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0)
        return line < preludeLines ? `the prelude of the block at ${block.source}:${block.line}` : `${block.source}:${block.line + 1 + line - preludeLines}`
      }
      t.same(own.map((d) => `${where(d)}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`), [], `the block at ${block.source}:${block.line}`)
    }
    const elsewhere = diagnostics.filter((d) => !files.some(({ file }) => d.file !== undefined && resolve(d.file.fileName) === resolve(file)))
    t.same(elsewhere.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')), [], 'no error outside the blocks')
  })
}
