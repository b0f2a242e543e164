// OpenTelemetry, when the app has @opentelemetry/api: a span per execution and the metrics, read
// back through the real SDKs' in-memory exporters.
import { context, metrics, ROOT_CONTEXT, trace, type Context, type ContextManager } from '@opentelemetry/api';
import { InMemoryMetricExporter, AggregationTemporality, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { AsyncLocalStorage } from 'node:async_hooks';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { createGuard, type GuardError } from '../src/index.js';
import { recordingLogger } from './support/guards.js';

/** What @opentelemetry/context-async-hooks does (an app's SDK registers one): the active context follows async calls. */
class AsyncLocalContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    active: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(active, () => fn.call(thisArg, ...args));
  }
  bind<T>(active: Context, target: T): T {
    if (typeof target !== 'function') return target;
    const run = (self: unknown, args: unknown[]): unknown =>
      this.with(active, () => (target as (...a: unknown[]) => unknown).apply(self, args));
    return function bound(this: unknown, ...args: unknown[]) {
      return run(this, args);
    } as T;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

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
    const byAttributes = (name: string) => Object.fromEntries(points(name).map((point) => [JSON.stringify(point.attributes), point.value]));
    expect(byAttributes('cronguard.executions')).toEqual({
      [JSON.stringify({ 'cronguard.job': 'measured', 'cronguard.outcome': 'succeeded' })]: 1,
      [JSON.stringify({ 'cronguard.job': 'broken', 'cronguard.outcome': 'failed' })]: 1,
    });
    expect(byAttributes('cronguard.skips')).toEqual({
      [JSON.stringify({ 'cronguard.job': 'measured', 'cronguard.reason': 'locked' })]: 1,
    });
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

it("runs the job in its span's context, counts cancelled runs apart, and ends the span of a coordinator fire that never completed", async () => {
  const spans = new InMemorySpanExporter();
  context.setGlobalContextManager(new AsyncLocalContextManager());
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
    const app = trace.getTracer('app');
    await guard.run({ name: 'parent', lockAtMostFor: '1m' }, async () => {
      await sleep(5);
      app.startSpan('query').end();
    });
    const finished = (name: string) => spans.getFinishedSpans().find((span) => span.name === name);
    const run = finished('cronguard.run parent');
    const child = finished('query');
    expect(child?.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
    expect(child?.spanContext().traceId).toBe(run?.spanContext().traceId);

    // A value the SDK cannot read still ends the span, as an error.
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    let rejectedWith: unknown;
    await guard
      .run({ name: 'hostile', lockAtMostFor: '1m' }, () => Promise.reject(proxy))
      .catch((error: unknown) => void (rejectedWith = error));
    expect(rejectedWith === proxy).toBe(true);
    expect(finished('cronguard.run hostile')?.status.code).toBe(2); // ERROR

    // node-cron never calls onComplete: the span ends once the coordinator forgets the lock (2 × lockAtMostFor).
    const coordinator = guard.coordinator({ lockAtMostFor: '200ms' });
    expect(await coordinator.shouldRun(`forgotten:${new Date(Math.floor(Date.now() / 1_000) * 1_000).toISOString()}`, 30_000)).toBe(true);
    await expect.poll(() => finished('cronguard.run forgotten'), { timeout: 10_000 }).toBeDefined();
    expect(finished('cronguard.run forgotten')?.status.code).toBe(2);

    // Stopped by shutdown with the signal's reason: cancelled, not an error.
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const stopped = guard.run({ name: 'stopped', lockAtMostFor: '1m' }, async (ctx) => {
      started();
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      throw ctx.signal.reason as GuardError;
    });
    await running;
    await guard.shutdown({ timeout: '10s' });
    await expect(stopped).rejects.toMatchObject({ code: 'SHUTDOWN' });
    const cancelled = finished('cronguard.run stopped');
    expect(cancelled?.status.code).toBe(0); // UNSET
    expect(cancelled?.attributes['cronguard.cancelled_by']).toBe('SHUTDOWN');
    const all = (await reader.collect()).resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    const outcomes = Object.fromEntries(
      (all.find((metric) => metric.descriptor.name === 'cronguard.executions')?.dataPoints ?? []).map((point) => [
        `${String(point.attributes['cronguard.job'])} ${String(point.attributes['cronguard.outcome'])}`,
        point.value,
      ]),
    );
    expect(outcomes).toEqual({
      'parent succeeded': 1,
      'hostile failed': 1,
      'forgotten abandoned': 1,
      'stopped cancelled': 1,
    });
  } finally {
    await guard.close();
    metrics.disable();
    trace.disable();
    context.disable();
  }
});
