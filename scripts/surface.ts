// The package's surface, counted with the TypeScript compiler (docs/decisions.md, "The main
// entry's surface"): the names an entry exports, values and types, as TypeScript counts the
// declarations (`export { a as b }` is one name, `default` is one); and the option settings an
// application can write, the keys of the plugin's options and of a route's `config.admission`,
// nested ones included. Run: `node --import tsx scripts/surface.ts`.
import { fileURLToPath } from 'node:url'
import { dirname, join, sep } from 'node:path'
import ts from 'typescript'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const LIB = join(ROOT, 'lib') + sep

function programOf (file: string): { program: ts.Program, source: ts.SourceFile, checker: ts.TypeChecker } {
  const program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node']
  })
  const source = program.getSourceFile(file)
  if (source === undefined) throw new Error(`surface: no source file ${file}`)
  return { program, source, checker: program.getTypeChecker() }
}

/** The names an entry (`lib/index.ts`, `lib/core/index.ts`) exports, sorted. */
export function exportedNames (entry: string): string[] {
  const { source, checker } = programOf(join(ROOT, entry))
  const module = checker.getSymbolAtLocation(source)
  if (module === undefined) throw new Error(`surface: ${entry} is not a module`)
  return checker.getExportsOfModule(module).map((symbol) => symbol.name).sort()
}

/** Whether a declaration is the package's own (not Fastify's, prom-client's or the standard library's). */
function ours (symbol: ts.Symbol | undefined): boolean {
  return symbol?.declarations?.some((declaration) => declaration.getSourceFile().fileName.startsWith(LIB.split(sep).join('/'))) === true
}

/**
 * Whether an option's value is itself a bag of settings to count: an object of the package's own
 * properties, with no call signature, written inline (`{ partitionKey }`), as a `Partial<…>`,
 * `Omit<…>` or `Record<string, …>` of one, or named `…Options` (`PressureOptions`). A backend, a
 * registry, a meter, a function or Fastify's route options are one setting, whatever their members.
 */
function isSettingsBag (type: ts.Type): boolean {
  if ((type.flags & (ts.TypeFlags.Object | ts.TypeFlags.Intersection)) === 0 || type.getCallSignatures().length > 0) return false
  const properties = type.getProperties()
  if (properties.length === 0 && type.getStringIndexType() === undefined) return false
  const named = type.aliasSymbol ?? type.getSymbol()
  if (ours(named) && named!.name !== '__type' && named!.name !== '__object' && !named!.name.endsWith('Options')) return false
  return properties.every((property) => ours(property))
}

/**
 * The settings under `path`: a key declared once and reachable in several places (a policy's
 * `limit`, in the plugin's `rateLimit`, a tier's, a route's) is one setting, listed at the first
 * path that reaches it; and one path is one setting, whatever the forms that declare it
 * (`maxInFlight.min` of the adaptive limit and of a fleet's).
 */
function collect (checker: ts.TypeChecker, type: ts.Type, path: string, found: Map<ts.Node, string>, seen: Set<ts.Type>): void {
  const members = type.isUnion() ? type.types : [type]
  for (const member of members) {
    if (checker.isArrayType(member)) {
      collect(checker, checker.getTypeArguments(member as ts.TypeReference)[0]!, path, found, seen)
      continue
    }
    if (!isSettingsBag(member) || seen.has(member)) continue
    seen.add(member)
    const index = member.getStringIndexType()
    if (index !== undefined) collect(checker, index, path, found, seen)
    for (const property of member.getProperties()) {
      const at = `${path}.${property.name}`
      const declaration = property.valueDeclaration ?? property.declarations?.[0]
      if (declaration === undefined) throw new Error(`surface: ${at} has no declaration`)
      if (!found.has(declaration) && ![...found.values()].includes(at)) found.set(declaration, at)
      collect(checker, checker.getNonNullableType(checker.getTypeOfSymbolAtLocation(property, declaration)), at, found, seen)
    }
    seen.delete(member)
  }
}

/** The option settings: the keys of `AdmissionOptions` (`options.…`) and `AdmissionRouteOptions` (`route.…`), nested ones included, each declared key once. */
export function optionSettings (): string[] {
  const { source, checker } = programOf(join(ROOT, 'lib/index.ts'))
  const module = checker.getSymbolAtLocation(source)!
  const found = new Map<ts.Node, string>()
  for (const [name, path] of [['AdmissionOptions', 'options'], ['AdmissionRouteOptions', 'route']] as const) {
    const symbol = checker.getExportsOfModule(module).find((s) => s.name === name)
    if (symbol === undefined) throw new Error(`surface: lib/index.ts exports no ${name}`)
    collect(checker, checker.getDeclaredTypeOfSymbol(checker.getAliasedSymbol(symbol)), path, found, new Set())
  }
  return [...found.values()].sort()
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const main = exportedNames('lib/index.ts')
  const core = exportedNames('lib/core/index.ts')
  const settings = optionSettings()
  console.log(`main entry (lib/index.ts): ${main.length} names\n  ${main.join(' ')}`)
  console.log(`./core (lib/core/index.ts): ${core.length} names`)
  const top = (prefix: string): number => settings.filter((s) => s.startsWith(prefix) && s.split('.').length === 2).length
  console.log(`options: ${top('options.')} of the plugin, ${top('route.')} of a route (the keys an options table lists)`)
  console.log(`option settings: ${settings.length}, nested keys included (${settings.filter((s) => s.startsWith('options.')).length} of the plugin, ${settings.filter((s) => s.startsWith('route.')).length} of a route)`)
  if (process.argv.includes('--list')) console.log(`  ${settings.join('\n  ')}`)
}
