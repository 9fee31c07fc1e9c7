// The part of autocannon 8's programmatic API the load child uses (the package ships no types).
declare module 'autocannon' {
  interface RequestData {
    method?: string
    path?: string
    headers?: Record<string, string>
  }
  export interface Request extends RequestData {
    setupRequest?: (request: RequestData, context: unknown) => RequestData
  }
  /** One connection (pipelining 1 only for `setRequests`). */
  interface Client {
    setRequests (requests: Request[]): void
  }
  interface Options {
    url: string
    connections?: number
    pipelining?: number
    duration?: number
    timeout?: number
    requests?: Request[]
    /** Called once per connection, before it connects. */
    setupClient?: (client: Client) => void
  }
  interface Histogram {
    average: number
    mean: number
    p50: number
    p99: number
    total: number
  }
  interface Result {
    duration: number
    requests: Histogram
    latency: Histogram
    errors: number
    timeouts: number
    non2xx: number
    resets: number
    statusCodeStats: Record<string, { count: number }>
  }
  /** Thenable; emits 'start' once the clients are set up and the timer runs. */
  interface Instance extends PromiseLike<Result> {
    once (event: 'start', listener: () => void): this
  }
  function autocannon (options: Options): Instance
  export default autocannon
}
