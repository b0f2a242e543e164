import { startWorker } from './processes.js';

/** One job's outcome for one round, in one process (test/fixtures/slot-race-worker.ts). */
export interface SlotRaceResult {
  readonly name: string;
  readonly round: number;
  readonly executed: boolean;
  readonly reason?: string;
  readonly error?: string;
}
type SlotRaceMessage =
  { type: 'ready'; error?: string } | { type: 'round'; results: SlotRaceResult[] } | { type: 'closed'; logged: string[] };

/** What a slot race came to: every count is 0 when the guard held. */
export interface SlotRaceOutcome {
  readonly executions: number;
  /** (job, slot) pairs run more than once, counted once per extra run. */
  readonly duplicates: number;
  /** (job, slot) pairs nobody ran. */
  readonly unrun: number;
  /** Skips with reason 'error'. */
  readonly errorSkips: number;
  /** Lines the guards logged (warnings and errors). */
  readonly logged: string[];
  readonly firstErrors: string[];
}

/**
 * `processes` OS processes run every job in `names` for the same slot, at the same instant, for
 * each of `rounds` rounds; a round starts once every process finished the previous one. On `url`
 * (tables of `prefix`, migrated beforehand), or process i on `url[i % url.length]` (the nodes of a
 * cluster).
 */
export async function slotRace(
  url: string | readonly string[],
  prefix: string,
  names: readonly string[],
  { processes = 4, rounds = 6 } = {},
): Promise<SlotRaceOutcome> {
  const urls = typeof url === 'string' ? [url] : url;
  const workers = Array.from({ length: processes }, (_, i) =>
    startWorker<SlotRaceMessage>('slot-race-worker.ts', [urls[i % urls.length] ?? '', prefix, JSON.stringify(names)]),
  );
  const ready = await Promise.all(workers.map((worker) => worker.next<Extract<SlotRaceMessage, { type: 'ready' }>>('ready')));
  const results: SlotRaceResult[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const startAt = Date.now() + 100;
    for (const worker of workers) worker.send({ round, startAt });
    const reports = await Promise.all(workers.map((worker) => worker.next<Extract<SlotRaceMessage, { type: 'round' }>>('round')));
    results.push(...reports.flatMap((report) => report.results));
  }
  for (const worker of workers) worker.send({ round: null, startAt: 0 });
  const closed = await Promise.all(workers.map((worker) => worker.next<Extract<SlotRaceMessage, { type: 'closed' }>>('closed')));
  let duplicates = 0;
  let unrun = 0;
  for (const name of names) {
    for (let round = 0; round < rounds; round += 1) {
      const wins = results.filter((result) => result.name === name && result.round === round && result.executed).length;
      if (wins === 0) unrun += 1;
      else duplicates += wins - 1;
    }
  }
  const errors = results.filter((result) => !result.executed && result.reason === 'error');
  return {
    executions: results.filter((result) => result.executed).length,
    duplicates,
    unrun,
    errorSkips: errors.length,
    logged: [
      ...ready.flatMap((message) => (message.error === undefined ? [] : [`ready: ${message.error}`])),
      ...closed.flatMap((message) => message.logged),
    ],
    firstErrors: errors.slice(0, 3).map((result) => `${JSON.stringify(result.name)}: ${result.error ?? ''}`),
  };
}

/** Job names that were SQL once escaped with backslashes on a NO_BACKSLASH_ESCAPES or ANSI_QUOTES server. */
export const HOSTILE_NAMES: readonly string[] = [
  "x' OR 1=1 -- ",
  "x\\' OR 1=1 -- ",
  'a"b',
  '`; DROP TABLE t; --',
  '\\',
  "'",
  '🦀 crab',
  'é'.repeat(255),
];
