/**
 * What the plugin needs of an OpenTelemetry `Meter` (`@opentelemetry/api` 1.3 or later), by
 * shape: the instruments are made through the Meter the app passes, so the plugin never imports
 * the API itself, and a Meter of another copy of it (two versions installed) is still one.
 */
export interface MetricsMeter {
  createHistogram (name: string, options?: MeterInstrumentOptions): MeterHistogram
  createObservableCounter (name: string, options?: MeterInstrumentOptions): MeterObservable
  createObservableUpDownCounter (name: string, options?: MeterInstrumentOptions): MeterObservable
  createObservableGauge (name: string, options?: MeterInstrumentOptions): MeterObservable
  addBatchObservableCallback (callback: MeterBatchCallback, observables: MeterObservable[]): void
  removeBatchObservableCallback (callback: MeterBatchCallback, observables: MeterObservable[]): void
}

/** An instrument's description, unit and (for the histogram) bucket boundaries. */
export interface MeterInstrumentOptions {
  description?: string
  unit?: string
  advice?: { explicitBucketBoundaries?: number[] }
}

export type MeterAttributes = Record<string, string>

export interface MeterHistogram {
  record (value: number, attributes?: MeterAttributes): void
}

/** An observable instrument, observed only through the batch callback. */
export type MeterObservable = object

export interface MeterBatchResult {
  observe (observable: MeterObservable, value: number, attributes?: MeterAttributes): void
}

export type MeterBatchCallback = (result: MeterBatchResult) => void

export const METER_METHODS: ReadonlyArray<keyof MetricsMeter> = Object.freeze([
  'createHistogram', 'createObservableCounter', 'createObservableUpDownCounter', 'createObservableGauge',
  'addBatchObservableCallback', 'removeBatchObservableCallback'
])

/** The first method `value` lacks to be a Meter; undefined when it has them all. */
export function missingMeterMethod (value: object): keyof MetricsMeter | undefined {
  return METER_METHODS.find((method) => typeof (value as Partial<Record<keyof MetricsMeter, unknown>>)[method] !== 'function')
}
