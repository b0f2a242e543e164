import { describeValue } from '../../core/describe-value.js';
import { parseDuration, type DurationInput } from '../../core/duration.js';
import type { ExecutionContext } from '../../core/execution-context.js';
import type { JobFunction } from '../../core/execute.js';

/** The `catchUp` option of `guard.schedule`: the window in ms, or null without catch-up; a `TypeError` when wrong. */
export function resolveCatchUp(value: unknown, job: string): number | null {
  if (value === undefined || value === false) return null;
  const ms =
    typeof value === 'string' || typeof value === 'number' ? parseDuration(value as DurationInput, { option: 'catchUp', job }) : Number.NaN;
  if (ms > 0) return ms;
  throw new TypeError(
    `Expected \`catchUp\` of job ${JSON.stringify(job)} to be false or a duration like '1h', got ${describeValue(value)}`,
  );
}

/** The job as a catch-up run sees it: `ctx.catchUp` true, the run marked in the history (`markCatchUp`). */
export function asCatchUp<T>(fn: JobFunction<T>, markCatchUp: (runId: string) => void): JobFunction<T> {
  return (ctx) => {
    markCatchUp(ctx.runId);
    const context: ExecutionContext = {
      name: ctx.name,
      runId: ctx.runId,
      slot: ctx.slot,
      catchUp: true,
      get signal() {
        return ctx.signal;
      },
      get lockExpiresAt() {
        return ctx.lockExpiresAt;
      },
      extend: (duration) => ctx.extend(duration),
    };
    return fn(context);
  };
}
