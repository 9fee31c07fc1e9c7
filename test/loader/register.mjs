// The tests' TypeScript loader (tap's `node-arg`): every test process imports this first.
//
// Why not tap's own (ts-node) or tsx: ts-node spends ~3 s of CPU per test process loading the
// TypeScript compiler (most of a CI run of ~110 processes), and tsx prints each module on one line,
// so the coverage report, which counts lines, sees every function of a loaded file as run. esbuild
// with its whitespace kept and an inline source map gives exact line and branch coverage.
import { register } from 'node:module'

register('./hooks.mjs', import.meta.url)
