// SPDX-License-Identifier: MIT
// The OpenTelemetry SDK for the telemetry tests: in-memory exporters, an async context manager and W3C propagation.
'use strict';

const api = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const {
  MeterProvider,
  InMemoryMetricExporter,
  PeriodicExportingMetricReader,
  AggregationTemporality,
} = require('@opentelemetry/sdk-metrics');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');

/**
 * Providers with in-memory exporters. The context manager and propagator
 * are global (as an SDK's start() sets them); the providers are handed to
 * lua-tasks through its telemetry option.
 * @returns {{ meterProvider, tracerProvider, spans(): object[], metrics(): Promise<Map<string, object>>, shutdown() }}
 */
function setupOtel() {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3600000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    tracerProvider,
    tracer: tracerProvider.getTracer('test'),
    spans: () => spanExporter.getFinishedSpans(),
    // Collects now: the last export's metrics by name ({ descriptor, dataPoints }).
    async metrics() {
      metricExporter.reset();
      await reader.forceFlush();
      const out = new Map();
      for (const rm of metricExporter.getMetrics()) {
        for (const sm of rm.scopeMetrics) for (const m of sm.metrics) out.set(m.descriptor.name, m);
      }
      return out;
    },
    async shutdown() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
      api.context.disable();
      api.propagation.disable();
    },
  };
}

/** The span id of a finished span's parent, or undefined (SDK 1.x and 2.x). */
function parentOf(span) {
  if (span.parentSpanContext) return span.parentSpanContext.spanId;
  return span.parentSpanId;
}

/** The data point of `metric` whose attributes include `attrs`, or undefined. */
function point(metric, attrs) {
  if (!metric) return undefined;
  return metric.dataPoints.find((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v));
}

module.exports = { setupOtel, parentOf, point };
