// Coverage is measured on the source in lib/ only (not on the built dist/ that the export test
// loads, nor on test helpers). tap wants the files themselves, so list them.
import { readdirSync } from 'node:fs'

const sources = readdirSync('lib', { recursive: true })
  .map(String)
  .filter((file) => file.endsWith('.ts'))
  .map((file) => `lib/${file}`)

export default function coverageMap () {
  return sources
}
