// Each fault scenario reports what it did and what was lost, per dialect; the global setup turns
// the reports into RELIABILITY.md when the run ends. A report is written before the assertion, so
// a failing scenario shows up in the file with what it lost.
import { appendFileSync } from 'node:fs';
import { expect, inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The JSON-lines file scenario reports go to. */
    reliabilityLog: string;
  }
}

/** The scenarios of RELIABILITY.md, in its order. */
export const SCENARIOS = {
  'contention-soak': '1. Contention soak',
  'crashed-holder': '2. Crashed holder',
  'paused-holder': '3. Paused holder',
  'database-restart': '4. Database restart',
  'clock-skew': '5. Clock skew',
  'bad-input': '6. Bad input',
  'slow-database': '7. Slow database',
  'pool-exhaustion': '8. Pool exhaustion',
  'hostile-job-errors': '9. Hostile job errors',
  'bad-server-settings': '10. Bad server settings',
} as const;
export type ScenarioId = keyof typeof SCENARIOS;

/** What one scenario did on one dialect. */
export interface Measured {
  /** What was done, in a few words ("8 processes × 4 jobs × 300 slots"). */
  readonly done: string;
  /** How many times (executions, crashes, generated inputs…). */
  readonly times: number;
  /** Each way something could be lost, and how many were; the target is always 0. */
  readonly lost: Readonly<Record<string, number>>;
  /** Figures worth keeping (recovery times, memory). */
  readonly figures?: string;
}

export interface ScenarioReport extends Measured {
  readonly scenario: ScenarioId;
  readonly dialect: string;
  /** Set when the scenario threw before it could count. */
  readonly failure?: string;
}

function write(report: ScenarioReport): void {
  appendFileSync(inject('reliabilityLog'), `${JSON.stringify(report)}\n`);
}

/** Runs a scenario on one dialect, reports it, then fails the test if anything was lost. */
export async function scenario(id: ScenarioId, dialect: string, body: () => Promise<Measured>): Promise<Measured> {
  let measured: Measured;
  try {
    measured = await body();
  } catch (error) {
    const failure = error instanceof Error ? (error.message.split('\n')[0] ?? error.name) : String(error);
    write({ scenario: id, dialect, done: 'did not finish', times: 0, lost: {}, failure });
    throw error;
  }
  write({ scenario: id, dialect, ...measured });
  const lost = Object.entries(measured.lost).filter(([, count]) => count !== 0);
  expect(lost, `${SCENARIOS[id]} on ${dialect}: ${measured.figures ?? ''}`).toEqual([]);
  return measured;
}
