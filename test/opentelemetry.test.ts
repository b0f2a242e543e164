// OpenTelemetry, when the app has @opentelemetry/api: a span per execution and the metrics, read
// back through the real SDKs' in-memory exporters.
import { metrics, trace } from '@opentelemetry/api';
import { InMemoryMetricExporter, AggregationTemporality, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { recordingLogger } from './support/guards.js';

it('reports a span per execution and metrics by outcome, skip reason and start delay', async () => {
  const spans = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 60_000,
  });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));

  const path = join(mkdtempSync(join(tmpdir(), 'cronguard-otel-')), 'otel.sqlite');
  const guard = createGuard({ database: `sqlite:${path}`, logger: recordingLogger() });
  try {
    await guard.migrate();
    await sleep(10); // the API loads in the background
    const slot = new Date(Date.now() - 250);
    await guard.run({ name: 'measured', lockAtMostFor: '1m', lockAtLeastFor: '1m', slot }, () => sleep(20));
    await guard.run({ name: 'measured', lockAtMostFor: '1m' }, () => 'skipped');
    await expect(guard.run({ name: 'broken', lockAtMostFor: '1m' }, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');

    const finished = spans.getFinishedSpans();
    expect(finished.map((span) => span.name).sort()).toEqual(['cronguard.run broken', 'cronguard.run measured']);
    const broken = finished.find((span) => span.name === 'cronguard.run broken');
    expect(broken?.status.code).toBe(2); // ERROR
    expect(broken?.events.map((event) => event.name)).toContain('exception');

    const { resourceMetrics } = await reader.collect();
    const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    const points = (name: string) => all.find((metric) => metric.descriptor.name === name)?.dataPoints ?? [];
    const byAttributes = (name: string) =>
      Object.fromEntries(points(name).map((point) => [JSON.stringify(point.attributes), point.value]));
    expect(byAttributes('cronguard.executions')).toEqual({
      [JSON.stringify({ 'cronguard.job': 'measured', 'cronguard.outcome': 'succeeded' })]: 1,
      [JSON.stringify({ 'cronguard.job': 'broken', 'cronguard.outcome': 'failed' })]: 1,
    });
    expect(byAttributes('cronguard.skips')).toEqual({ [JSON.stringify({ 'cronguard.job': 'measured', 'cronguard.reason': 'locked' })]: 1 });
    const delay = points('cronguard.start_delay')[0]?.value as { count: number; sum: number } | undefined;
    expect(delay?.count).toBe(1);
    expect(delay?.sum).toBeGreaterThanOrEqual(250);
    const durations = points('cronguard.execution.duration').map((point) => (point.value as { count: number }).count);
    expect(durations.reduce((a, b) => a + b, 0)).toBe(2);
  } finally {
    await guard.close();
    metrics.disable();
    trace.disable();
  }
});
