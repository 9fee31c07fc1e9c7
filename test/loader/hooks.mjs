// Module hooks for register.mjs: a relative `./x.js` that does not exist is `./x.ts` (the NodeNext
// import style the sources use), and a `.ts` file is compiled by esbuild, types stripped, nothing
// minified, names kept, with an inline source map (Node maps stack traces and coverage through it).
import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { transform } from 'esbuild'

const LIB = fileURLToPath(new URL('../../lib/', import.meta.url))

export async function resolve (specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (error) {
    const local = specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('file:')
    if (local && specifier.endsWith('.js') && error?.code === 'ERR_MODULE_NOT_FOUND') {
      return next(`${specifier.slice(0, -3)}.ts`, context)
    }
    throw error
  }
}

export async function load (url, context, next) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return next(url, context)
  const file = fileURLToPath(url)
  const { code } = await transform(await readFile(file, 'utf8'), {
    loader: 'ts',
    format: 'esm',
    target: 'node20',
    sourcemap: 'inline',
    // A test's function name is what it may check (a plugin's name is its address), and esbuild
    // renames a function expression named like its variable. Not in lib/: the wrapper that keeps
    // names splits an arrow function's coverage from its calls.
    keepNames: !file.startsWith(LIB),
    sourcefile: file
  })
  return { format: 'module', source: code, shortCircuit: true }
}
