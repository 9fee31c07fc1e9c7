import t from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'

// The documentation a newcomer starts from:
//
// - README.md is for an application author and stays short (at most 300 lines); the rest is in docs/.
// - README.md, CONTRIBUTING.md and the pages of docs/ speak the user's language: none of the
//   project's internal words (the names of its design documents and their types), and no commit
//   hash in prose (a hash inside a fenced code block, such as a pinned SHA, is code). The benchmarks'
//   READMEs are held to the same, except the word "seed", which V8's `--hash-seed` makes a
//   benchmark knob there.
// - Every relative link of README.md, CONTRIBUTING.md, docs/ and the benchmarks' READMEs points to
//   a file that exists, and a `#fragment` of a markdown file to one of its headings (GitHub's anchors).
//

const MAX_README_LINES = 300

/** Markdown files under `dir`, recursively, as paths from the repository's root. */
function markdownUnder (dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[])
    .map((file) => join(dir, String(file)))
    .filter((file) => file.endsWith('.md'))
    .sort()
}

const pages = markdownUnder('docs')
const benchReadmes = markdownUnder('bench').filter((file) => file.endsWith('README.md'))
const worded = ['README.md', 'CONTRIBUTING.md', ...pages]
const linked = ['README.md', 'CONTRIBUTING.md', ...pages, ...benchReadmes]

interface Line { number: number, text: string, code: boolean }

/** Each line, and whether it is inside a fenced code block (a fence line counts as code). */
function lines (markdown: string): Line[] {
  let fence: string | undefined
  return markdown.split('\n').map((text, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(text)
    if (fence === undefined && open !== null) {
      fence = open[1]!
      return { number: i + 1, text, code: true }
    }
    if (fence !== undefined) {
      if (new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(text)) fence = undefined
      return { number: i + 1, text, code: true }
    }
    return { number: i + 1, text, code: false }
  })
}

// Internal words: anywhere, code included.
const WORDS: Array<[string, RegExp]> = [
  ['seed', /\bseed\b/i],
  ['LimBkt', /\bLimBkt\b/],
  ['card (a design card)', /\bcard\b/i]
]
// A commit hash: 7 to 40 hex digits with at least one letter and one digit (so that neither a
// decimal number nor a word such as "decade" is one). Outside fenced code blocks only.
const HASH = /\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b/

function wordingProblems (file: string, words: Array<[string, RegExp]>): string[] {
  const problems: string[] = []
  for (const { number, text, code } of lines(readFileSync(file, 'utf8'))) {
    for (const [name, pattern] of words) {
      if (pattern.test(text)) problems.push(`${file}:${number}: ${name}: ${text.trim()}`)
    }
    if (!code) {
      const hash = HASH.exec(text)
      if (hash !== null) problems.push(`${file}:${number}: a commit hash (${hash[0]}) in prose: ${text.trim()}`)
    }
  }
  return problems
}

/** GitHub's anchor of a heading: lowercased, punctuation dropped, spaces to hyphens; repeats numbered. */
function anchors (markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const found = new Set<string>()
  for (const { text, code } of lines(markdown)) {
    const heading = code ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)
    if (heading === null) continue
    const plain = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const base = plain.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    found.add(count === 0 ? base : `${base}-${count}`)
  }
  return found
}

interface Link { file: string, line: number, target: string }

/** Inline links and images outside code (fenced blocks and `code spans`), with a relative target. */
function relativeLinks (file: string): Link[] {
  const links: Link[] = []
  for (const { number, text, code } of lines(readFileSync(file, 'utf8'))) {
    if (code) continue
    const prose = text.replace(/(`+)[\s\S]*?\1/g, '')
    for (const match of prose.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1]!
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue // https:, mailto:
      links.push({ file, line: number, target })
    }
  }
  return links
}

t.test(`README.md has at most ${MAX_README_LINES} lines`, async (t) => {
  const count = readFileSync('README.md', 'utf8').replace(/\n$/, '').split('\n').length
  t.ok(count <= MAX_README_LINES, `README.md: ${count} lines`)
})

t.test('the documentation uses no internal words and no commit hashes in prose', async (t) => {
  t.ok(pages.length > 0, 'docs/ has pages')
  t.same(worded.flatMap((file) => wordingProblems(file, WORDS)), [], worded.join(', '))
  const benchWords = WORDS.filter(([name]) => name !== 'seed')
  t.same(benchReadmes.flatMap((file) => wordingProblems(file, benchWords)), [], benchReadmes.join(', '))
})

t.test('the checks catch what they are for', async (t) => {
  const problems = (markdown: string): number => {
    let count = 0
    for (const { text, code } of lines(markdown)) {
      for (const [, pattern] of WORDS) if (pattern.test(text)) count++
      if (!code && HASH.test(text)) count++
    }
    return count
  }
  t.equal(problems('measured at 43474b8'), 1, 'a short hash in prose')
  t.equal(problems('```sh\ngit checkout 43474b8\n```'), 0, 'a hash in a code block is code')
  t.equal(problems('1000000 requests, 4294967291, a decade'), 0, 'decimal numbers and hex-looking words are not hashes')
  t.equal(problems("the seed's v1 wire format"), 1)
  t.equal(problems('the LimBkt values of the design card'), 2)
  t.same([...anchors("# Title\n## Rate limiting after authentication (`hook: 'preHandler'`)\n## Title\n```\n# not a heading\n```")],
    ['title', 'rate-limiting-after-authentication-hook-prehandler', 'title-1'])
})

t.test('every relative link points to a file that exists, and a fragment to a heading there', async (t) => {
  const links = linked.flatMap(relativeLinks)
  t.ok(links.length > 0)
  const broken: string[] = []
  for (const { file, line, target } of links) {
    const [path, fragment] = target.split('#', 2) as [string, string | undefined]
    const resolved = path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path)))
    if (!existsSync(resolved)) {
      broken.push(`${file}:${line}: ${target}: no such file (${resolved})`)
      continue
    }
    if (fragment !== undefined && fragment !== '') {
      if (!resolved.endsWith('.md') || statSync(resolved).isDirectory()) continue
      if (!anchors(readFileSync(resolved, 'utf8')).has(fragment)) broken.push(`${file}:${line}: ${target}: no heading #${fragment} in ${resolved}`)
    }
  }
  t.same(broken, [])
})

t.test('the README links to every page of docs/', async (t) => {
  const targets = new Set(relativeLinks('README.md').map(({ target }) => normalize(target.split('#')[0]!)))
  t.same(pages.filter((page) => !targets.has(page)), [], 'pages the README does not link to')
})
