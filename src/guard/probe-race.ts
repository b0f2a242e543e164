import type { ProbeRaceResult } from '../admin/probe.js';
import { messageOf } from '../core/errors.js';
import type { JobFunction } from '../core/execute.js';
import type { RunOptions } from '../core/job-options.js';
import type { RunResult } from '../core/run-result.js';
import type { ShutdownOptions } from './guard-options.js';

/** What the race needs of a guard: one of its own per contender, so that each takes on its own connection. */
export interface ProbeContender {
  run<T>(options: RunOptions, fn: JobFunction<T>): Promise<RunResult<Awaited<T>>>;
  shutdown(options?: ShutdownOptions): Promise<void>;
}

/** How long a winner holds the probe lock at most, waiting for the others to lose. */
const HOLD_LIMIT_MS = 10_000;

/**
 * `contenders` guards (each with a connection of its own) take the lock `name` at the same moment.
 * A winner holds it until every other contender has lost or won, so that a second winner is seen
 * (a database that does not serialise the take), then releases. Nothing is written to the history.
 */
export async function raceForProbeLock(
  openContender: (name: string) => ProbeContender,
  name: string,
  contenders: number,
): Promise<ProbeRaceResult> {
  const guards = Array.from({ length: contenders }, () => openContender(name));
  let winners = 0;
  // Contenders that won or lost: once all have, the winners let go.
  let arrived = 0;
  let allIn: () => void = () => undefined;
  const everyoneDone = new Promise<void>((resolve) => {
    allIn = resolve;
  });
  const arrive = (): void => {
    arrived += 1;
    if (arrived >= contenders) allIn();
  };
  const errors: string[] = [];
  try {
    await Promise.all(
      guards.map(async (guard) => {
        let won = false;
        try {
          const result = await guard.run({ name, lockAtMostFor: '30s' }, async () => {
            won = true;
            winners += 1;
            arrive();
            await Promise.race([everyoneDone, new Promise((resolve) => setTimeout(resolve, HOLD_LIMIT_MS).unref())]);
          });
          if (!result.executed && result.reason === 'error') errors.push(messageOf(result.error));
        } catch (error) {
          errors.push(messageOf(error));
        } finally {
          if (!won) arrive();
        }
      }),
    );
  } finally {
    await Promise.allSettled(guards.map((guard) => guard.shutdown({ timeout: '5s' })));
  }
  return { contenders, winners, errors };
}
