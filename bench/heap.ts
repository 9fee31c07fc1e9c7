// What the heap holds now, after full collections: `node --expose-gc` only.
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')

/** Heap and array buffers in use, after two full collections (the second frees what the first's finalizers let go). */
export function used (): number {
  gc!(); gc!()
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}
