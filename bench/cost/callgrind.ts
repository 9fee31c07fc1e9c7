// Reading callgrind's dumps: `<file>.<n>` for each `--dump-before` trigger, `<file>` at exit.
import { readdirSync, readFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

/** Ir of each numbered dump of `outFile`, in order (index 0 is dump 1, the start-up). */
export function dumpTotals (outFile: string): number[] {
  const dir = dirname(outFile)
  const prefix = basename(outFile) + '.'
  const parts = readdirSync(dir)
    .filter((f) => f.startsWith(prefix) && /^\d+$/.test(f.slice(prefix.length)))
    .map((f) => Number(f.slice(prefix.length)))
    .sort((a, b) => a - b)
  parts.forEach((part, i) => { if (part !== i + 1) throw new Error(`${outFile}: dump ${i + 1} missing`) })
  return parts.map((part) => totalOf(join(dir, `${prefix}${part}`)))
}

/** The Ir of one dump: its `totals:` line (else `summary:`). */
export function totalOf (file: string): number {
  const text = readFileSync(file, 'utf8')
  const line = /^totals:\s*(\d+)/m.exec(text) ?? /^summary:\s*(\d+)/m.exec(text)
  if (line === null) throw new Error(`${file}: no totals: or summary: line`)
  return Number(line[1])
}
