// The import graph of lib/: no module imports itself through others (type-only imports count: a
// circle of types is a circle of design), lib/core/ stands alone (it is published on its own, as
// `fastify-admission/core`), and the gate sits on top of pressure, metrics and the live page, not beside them.
// Every .ts file under lib/ is parsed with TypeScript's parser (so a specifier in a comment or a
// string is not an import), its relative specifiers resolved as NodeNext does (`./x.js` is
// `x.ts`, `./dir/index.js` is `dir/index.ts`).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import ts from 'typescript'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/**
 * The module specifiers of a source text: imports (`import type` too), re-exports (`export … from`,
 * `export * from`), side-effect imports, dynamic `import()` and type-level `import('…').T`.
 */
function specifiersOf (fileName: string, source: string): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text)
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      found.push(node.moduleReference.expression.text)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] !== undefined && ts.isStringLiteral(node.arguments[0])) {
      found.push(node.arguments[0].text)
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

/** The file a relative specifier names (a path from the repository's root), or undefined. */
function resolveSpecifier (from: string, specifier: string): string | undefined {
  const target = posix.join(posix.dirname(from), specifier)
  const candidates = [target.replace(/\.js$/, '.ts'), `${target}.ts`, posix.join(target, 'index.ts')]
  return candidates.find((candidate) => existsSync(join(ROOT, candidate)) && statSync(join(ROOT, candidate)).isFile())
}

interface Graph {
  /** Every .ts file under lib/, and the lib/ files it imports. */
  readonly edges: ReadonlyMap<string, readonly string[]>
  /** Non-relative specifiers (packages, `node:` builtins), by file. */
  readonly packages: ReadonlyMap<string, readonly string[]>
  /** Relative specifiers that name no file: `<file>: <specifier>`. */
  readonly unresolved: readonly string[]
}

function importGraph (dir: string): Graph {
  const files = readdirSync(join(ROOT, dir), { recursive: true }).map(String)
    .filter((file) => file.endsWith('.ts'))
    .map((file) => posix.join(dir, file.split('\\').join('/')))
    .sort()
  const edges = new Map<string, string[]>()
  const packages = new Map<string, string[]>()
  const unresolved: string[] = []
  for (const file of files) {
    const specifiers = specifiersOf(file, readFileSync(join(ROOT, file), 'utf8'))
    const local: string[] = []
    for (const specifier of specifiers.filter((s) => s.startsWith('.'))) {
      const target = resolveSpecifier(file, specifier)
      if (target === undefined) unresolved.push(`${file}: ${specifier}`)
      else if (!local.includes(target)) local.push(target)
    }
    edges.set(file, local)
    packages.set(file, specifiers.filter((s) => !s.startsWith('.')))
  }
  return { edges, packages, unresolved }
}

/** The strongly connected components with a circle (two files or more, or a file importing itself), Tarjan's way. */
function components (edges: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const connect = (v: string): void => {
    index.set(v, next)
    low.set(v, next)
    next++
    stack.push(v)
    onStack.add(v)
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        connect(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!))
      }
    }
    if (low.get(v) !== index.get(v)) return
    const component: string[] = []
    let w: string
    do {
      w = stack.pop()!
      onStack.delete(w)
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(component.sort())
  }
  for (const v of edges.keys()) if (!index.has(v)) connect(v)
  return found.sort((a, b) => (a[0]! < b[0]! ? -1 : 1))
}

/** The shortest circle from `start` back to it within `members` (breadth first), as `a → b → a`. */
function shortestCircle (edges: ReadonlyMap<string, readonly string[]>, members: ReadonlySet<string>, start: string): string[] {
  const previous = new Map<string, string>()
  const queue = [start]
  for (let i = 0; i < queue.length; i++) {
    const v = queue[i]!
    for (const w of edges.get(v) ?? []) {
      if (!members.has(w)) continue
      if (w === start) {
        const path: string[] = []
        for (let at = v; at !== start; at = previous.get(at)!) path.unshift(at)
        return [start, ...path, start]
      }
      if (!previous.has(w)) {
        previous.set(w, v)
        queue.push(w)
      }
    }
  }
  // A strongly connected component has a circle through each of its members.
  throw new Error(`no circle through ${start}`)
}

/** A component as its circles: the shortest through each member, each listed once. */
function circlesIn (edges: ReadonlyMap<string, readonly string[]>, component: readonly string[]): string[] {
  const members = new Set(component)
  const circles = new Set<string>()
  for (const start of component) {
    // The same circle found from another of its files is listed once: from its first file in order.
    const ring = shortestCircle(edges, members, start).slice(0, -1)
    const first = [...ring].sort()[0]!
    const at = ring.indexOf(first)
    circles.add([...ring.slice(at), ...ring.slice(0, at), first].join(' → '))
  }
  return [...circles]
}

const under = (dir: string) => (file: string): boolean => file.startsWith(`${dir}/`)

const graph = importGraph('lib')

t.test('the parser finds every kind of specifier, and none in comments or strings', async (t) => {
  const source = [
    "import type { A } from './a.js'",
    "import { type B, c } from './b.js'",
    "import './side-effect.js'",
    "export * from './star.js'",
    "export type { D } from './d.js'",
    "export { e } from 'package'",
    "// import { no } from './comment.js'",
    "const text = \"import { no } from './string.js'\"",
    "const lazy = import('./lazy.js')",
    "type T = import('./type-query.js').T",
    "declare module 'fastify' { interface X { y: string } }"
  ].join('\n')
  t.strictSame(specifiersOf('sample.ts', source), [
    './a.js', './b.js', './side-effect.js', './star.js', './d.js', 'package', './lazy.js', './type-query.js'
  ])
})

t.test('the graph: every file under lib/, every relative specifier resolved', async (t) => {
  t.ok(graph.edges.size > 50, `${graph.edges.size} files`)
  t.strictSame(graph.unresolved, [], 'no relative specifier that names no file')
  t.ok(graph.edges.get('lib/index.ts')?.includes('lib/gate/plugin.ts'), 'lib/index.ts → lib/gate/plugin.ts')
  t.ok(graph.edges.get('lib/core/index.ts')?.includes('lib/core/rates/index.ts'), 'a directory\'s index.js is its index.ts')
  t.strictSame(resolveSpecifier('lib/index.ts', './core/index.js'), 'lib/core/index.ts')
  t.strictSame(resolveSpecifier('lib/index.ts', './core'), 'lib/core/index.ts', 'a directory: its index.ts')
  t.strictSame(resolveSpecifier('lib/index.ts', './nowhere.js'), undefined)
})

t.test('no import circles', async (t) => {
  const found = components(graph.edges)
  t.strictSame(found.map((component) => circlesIn(graph.edges, component)), [], 'no circle anywhere under lib/, type-only imports included')
})

t.test('lib/core/ imports nothing from outside lib/core/', async (t) => {
  const core = [...graph.edges.keys()].filter(under('lib/core'))
  t.ok(core.length > 0)
  const outside: string[] = []
  for (const file of core) {
    for (const target of graph.edges.get(file)!) if (!under('lib/core')(target)) outside.push(`${file} → ${target}`)
    for (const name of graph.packages.get(file)!) if (!name.startsWith('node:')) outside.push(`${file} → ${name}`)
  }
  t.strictSame(outside, [], 'only lib/core/ files (and node: builtins)')
})

/** `dir`'s imports of lib/gate/, as `file → target`. */
function gateImports (dir: string): string[] {
  const found: string[] = []
  for (const [file, targets] of graph.edges) {
    if (!under(dir)(file)) continue
    for (const target of targets) if (under('lib/gate')(target)) found.push(`${file} → ${target}`)
  }
  return found
}

t.test('pressure, metrics and the live page sit below the gate: they do not import lib/gate/', async (t) => {
  for (const edge of [...gateImports('lib/pressure'), ...gateImports('lib/metrics'), ...gateImports('lib/live')]) t.comment(`below the gate, importing it: ${edge}`)
  t.strictSame(gateImports('lib/pressure'), [], 'lib/pressure/ imports no lib/gate/ file')
  t.strictSame(gateImports('lib/metrics'), [], 'lib/metrics/ imports no lib/gate/ file')
  t.strictSame(gateImports('lib/live'), [], 'lib/live/ imports no lib/gate/ file: it reads the stats it is handed')
})

t.test('lib/client/ is the client alone: of lib/ only the validation toolkit and the core, of packages only undici\'s types', async (t) => {
  const client = [...graph.edges.keys()].filter(under('lib/client'))
  t.ok(client.length > 0)
  const outside: string[] = []
  for (const file of client) {
    for (const target of graph.edges.get(file)!) if (!['lib/client', 'lib/validation', 'lib/core'].some((dir) => under(dir)(target))) outside.push(`${file} → ${target}`)
    for (const name of graph.packages.get(file)!) if (!name.startsWith('node:') && name !== 'undici') outside.push(`${file} → ${name}`)
  }
  t.strictSame(outside, [], 'nothing of the server (the gate, Fastify)')
  const undici = client.filter((file) => /^import\s+(?!type\b)[^\n]*from\s+'undici'/m.test(readFileSync(join(ROOT, file), 'utf8')))
  t.strictSame(undici, [], 'undici only as `import type`: the application brings it')
})
