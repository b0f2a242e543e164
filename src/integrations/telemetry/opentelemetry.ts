import type { RunContext } from '../../core/run-state.js';
import { messageOf } from '../../core/errors.js';
import type { GuardEvents } from '../../core/events.js';

type OpenTelemetryApi = typeof import('@opentelemetry/api');
type Span = import('@opentelemetry/api').Span;

/**
 * `@opentelemetry/api` when the app has it installed (an optional peer dependency), loaded once per
 * process; undefined otherwise. Nothing is imported, and nothing breaks, when it is absent.
 */
let api: Promise<OpenTelemetryApi | undefined> | undefined;
function loadApi(): Promise<OpenTelemetryApi | undefined> {
  api ??= import('@opentelemetry/api').then(
    (module) => module,
    () => undefined,
  );
  return api;
}

const SCOPE = 'cronguard';

type Outcome = 'succeeded' | 'failed' | 'cancelled' | 'abandoned';

/**
 * Reports a guard's executions to OpenTelemetry, as a consumer of its events: a span per execution
 * (`cronguard.run`), and the metrics `cronguard.executions` (by outcome: succeeded, failed,
 * cancelled, abandoned), `cronguard.execution.duration` (ms), `cronguard.skips` (by reason),
 * `cronguard.start_delay` (ms behind the slot), `cronguard.lock_lost` and `cronguard.overran`, and
 * from the slot ledger `cronguard.missed` (slots no replica ran) and `cronguard.late` (late starts).
 * Returns how to run a job inside its span's context, so that the spans the job makes are its
 * children. Until the API has loaded (a microtask or two after createGuard), executions are not
 * reported.
 */
export function reportToOpenTelemetry(events: GuardEvents): RunContext {
  let inSpan: RunContext | undefined;
  void loadApi().then((otel) => {
    if (otel === undefined) return;
    const meter = otel.metrics.getMeter(SCOPE);
    const tracer = otel.trace.getTracer(SCOPE);
    const executions = meter.createCounter('cronguard.executions', {
      description: 'Guarded executions that ran, by outcome',
    });
    const duration = meter.createHistogram('cronguard.execution.duration', {
      unit: 'ms',
      description: 'How long guarded jobs ran',
    });
    const skips = meter.createCounter('cronguard.skips', { description: 'Executions that did not run, by reason' });
    const startDelay = meter.createHistogram('cronguard.start_delay', {
      unit: 'ms',
      description: 'From a scheduled slot to the job starting on the winning replica',
    });
    const lockLost = meter.createCounter('cronguard.lock_lost', {
      description: 'Locks found taken by another execution',
    });
    const overran = meter.createCounter('cronguard.overran', { description: 'Executions that ran past their lock' });
    const missed = meter.createCounter('cronguard.missed', {
      description: 'Scheduled slots no replica ran, counted by the winner of the slot after the gap',
    });
    const late = meter.createCounter('cronguard.late', {
      description: 'Runs that started more than lateAfter after their slot',
    });
    const spans = new Map<string, Span>();

    events.on('acquired', ({ job, runId, slot }) => {
      const span = tracer.startSpan(`cronguard.run ${job}`, {
        attributes: {
          'cronguard.job': job,
          'cronguard.run_id': runId,
          ...(slot === null ? {} : { 'cronguard.slot': slot.toISOString() }),
        },
      });
      spans.set(runId, span);
      if (slot !== null) startDelay.record(Date.now() - slot.getTime(), { 'cronguard.job': job });
    });
    inSpan = (runId, job) => {
      const span = spans.get(runId);
      return span === undefined ? job() : otel.context.with(otel.trace.setSpan(otel.context.active(), span), job);
    };
    /** Counts the execution and ends its span (`mark` first sets its status), whatever `mark` does. */
    const finish = (runId: string, job: string, outcome: Outcome, ms: number | undefined, mark?: (span: Span) => void): void => {
      executions.add(1, { 'cronguard.job': job, 'cronguard.outcome': outcome });
      if (ms !== undefined) duration.record(ms, { 'cronguard.job': job, 'cronguard.outcome': outcome });
      const span = spans.get(runId);
      spans.delete(runId);
      if (span === undefined) return;
      try {
        mark?.(span);
      } finally {
        span.end();
      }
    };
    events.on('succeeded', ({ job, runId, durationMs }) => finish(runId, job, 'succeeded', durationMs));
    events.on('failed', ({ job, runId, durationMs, error }) =>
      finish(runId, job, 'failed', durationMs, (span) => {
        span.setStatus({ code: otel.SpanStatusCode.ERROR });
        recordException(span, error);
      }),
    );
    // Told to stop, and stopped: not an error.
    events.on('cancelled', ({ job, runId, durationMs, reason }) =>
      finish(runId, job, 'cancelled', durationMs, (span) => span.setAttribute('cronguard.cancelled_by', reason.code)),
    );
    // A coordinator fire whose completion never came: how long it ran is unknown.
    events.on('abandoned', ({ job, runId }) =>
      finish(runId, job, 'abandoned', undefined, (span) =>
        span.setStatus({ code: otel.SpanStatusCode.ERROR, message: 'node-cron never reported the end of this run' }),
      ),
    );
    events.on('skipped', ({ job, reason }) => skips.add(1, { 'cronguard.job': job, 'cronguard.reason': reason }));
    events.on('lock-lost', ({ job }) => lockLost.add(1, { 'cronguard.job': job }));
    events.on('overran', ({ job }) => overran.add(1, { 'cronguard.job': job }));
    events.on('missed', ({ job, count }) => missed.add(count, { 'cronguard.job': job }));
    events.on('late', ({ job }) => late.add(1, { 'cronguard.job': job }));
  });
  return (runId, job) => (inSpan === undefined ? job() : inSpan(runId, job));
}

/** Records what the job threw on its span: the error itself when the SDK can read it, else its text. */
function recordException(span: Span, error: unknown): void {
  try {
    if (error instanceof Error) {
      span.recordException(error);
      return;
    }
  } catch {
    // A revoked Proxy, or an error whose getters throw: its text below.
  }
  span.recordException(messageOf(error));
}
