// An OpenTelemetry SDK of a test's own, and what its collections report.
import { MeterProvider, MetricReader, type DataPoint, type MetricData, type ResourceMetrics } from '@opentelemetry/sdk-metrics'

/** A reader that exports nothing on its own: the test collects when it wants to look. */
export class TestReader extends MetricReader {
  protected override async onForceFlush (): Promise<void> {}
  protected override async onShutdown (): Promise<void> {}
}

/** A MeterProvider of its own and its reader (never the global one). */
export function sdk (): { provider: MeterProvider, reader: TestReader } {
  const reader = new TestReader()
  return { provider: new MeterProvider({ readers: [reader] }), reader }
}

/** The instruments as a collection reports them, by name. */
export function byName (resourceMetrics: ResourceMetrics): Map<string, MetricData> {
  const found = new Map<string, MetricData>()
  for (const scope of resourceMetrics.scopeMetrics) for (const metric of scope.metrics) found.set(metric.descriptor.name, metric)
  return found
}

export async function collect (reader: MetricReader): Promise<Map<string, MetricData>> {
  const { resourceMetrics, errors } = await reader.collect()
  if (errors.length > 0) throw new AggregateError(errors, 'the collection failed')
  return byName(resourceMetrics)
}

/** The data points of `name` whose attributes include `attributes`. */
export function pointsOf (metrics: Map<string, MetricData>, name: string, attributes: Record<string, string> = {}): Array<DataPoint<unknown>> {
  const metric = metrics.get(name)
  if (metric === undefined) return []
  const wanted = Object.entries(attributes)
  return (metric.dataPoints as Array<DataPoint<unknown>>).filter((point) => wanted.every(([k, v]) => point.attributes[k] === v))
}

/** The value of the one point of `name` whose attributes include `attributes`; undefined when there is none. */
export function valueIn (metrics: Map<string, MetricData>, name: string, attributes: Record<string, string> = {}): unknown {
  const found = pointsOf(metrics, name, attributes)
  if (found.length === 0) return undefined
  if (found.length > 1) throw new Error(`${found.length} points of ${name} match ${JSON.stringify(attributes)}`)
  return found[0]!.value
}
