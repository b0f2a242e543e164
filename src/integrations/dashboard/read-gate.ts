import type { DashboardSource } from './dashboard.js';

/**
 * How many of the dashboard's reads of one guard run at once; the others wait in line. The
 * dashboard reads through the guard's own connection pool (10 connections by default on
 * PostgreSQL and MySQL): ten job pages loaded at once sent 40 reads, which took every connection
 * and queued ahead of the guarded jobs' acquires (the figure 12 bench measured an acquire waiting
 * up to 0.9 s). Three keeps seven of the default pool's connections for the jobs whatever the
 * pages do, and lets the overview's three reads of a page run together. A page only waits longer.
 */
export const DASHBOARD_CONCURRENT_READS = 3;

/** A line of reads, at most `limit` running at once, the rest started in the order they came. */
export class ReadGate {
  readonly #limit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit = DASHBOARD_CONCURRENT_READS) {
    this.#limit = limit;
  }

  /** The reads running now (for tests). */
  get running(): number {
    return this.#running;
  }

  async run<T>(read: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running += 1;
    try {
      return await read();
    } finally {
      // The place goes straight to the next in line (the count stays), or is given back.
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }
}

/** The source with its reads through the gate; the controls (writes an operator asked for) go straight. */
export function gatedSource(source: DashboardSource, gate: ReadGate): DashboardSource {
  return {
    ...source,
    jobNames: (query) => gate.run(() => source.jobNames(query)),
    locks: (names) => gate.run(() => source.locks(names)),
    recentRuns: (jobs, perJob) => gate.run(() => source.recentRuns(jobs, perJob)),
    recentSlots: (jobs, perJob) => gate.run(() => source.recentSlots(jobs, perJob)),
    slots: (query) => gate.run(() => source.slots(query)),
    run: (id) => gate.run(() => source.run(id)),
    history: (query) => gate.run(() => source.history(query)),
    ...(source.controls === undefined
      ? {}
      : {
          controls: {
            ...source.controls,
            audit: (job: string) => gate.run(() => (source.controls as NonNullable<DashboardSource['controls']>).audit(job)),
          },
        }),
  };
}
