// Counting what replicas of test/fixtures/topology-replica.ts ran: each (job, slot) of a window
// ran once, twice or not at all, and what the guards logged meanwhile.
import type { Worker } from '../../support/processes.js';

/** What test/fixtures/topology-replica.ts sends its parent. */
export type TopologyReplicaMessage =
  | { type: 'ready'; pid: number }
  | { type: 'started'; job: string; slot: string; start: number }
  | { type: 'ran'; job: string; slot: string; start: number; end: number }
  | { type: 'log'; level: 'warn' | 'error'; message: string; at: number }
  | { type: 'failed-skip'; job: string; slot: string | null; code: string | undefined; at: number }
  | { type: 'exiting'; pid: number };

export interface SlotTally {
  readonly expected: number;
  readonly ranOnce: number;
  readonly duplicated: number;
  readonly missed: number;
  /** The missed (job, slot) pairs, as `job@seconds-from-window-start`. */
  readonly missedPairs: readonly string[];
}

/** Executions that started (a replica killed mid-run never says 'ran'), per `job slot-ms`. */
function startsBySlot(replicas: readonly Worker<TopologyReplicaMessage>[]): Map<string, number> {
  const starts = new Map<string, number>();
  for (const replica of replicas) {
    for (const message of replica.received) {
      if (message.type !== 'started') continue;
      const key = `${message.job} ${Date.parse(message.slot)}`;
      starts.set(key, (starts.get(key) ?? 0) + 1);
    }
  }
  return starts;
}

/** The (job, slot) pairs of every-second `jobs` with slots in [fromMs, toMs): how often each started. */
export function tallySlots(replicas: readonly Worker<TopologyReplicaMessage>[], jobs: number, fromMs: number, toMs: number): SlotTally {
  const starts = startsBySlot(replicas);
  let expected = 0;
  let ranOnce = 0;
  let duplicated = 0;
  const missedPairs: string[] = [];
  const first = Math.ceil(fromMs / 1_000) * 1_000;
  for (let slot = first; slot < toMs; slot += 1_000) {
    for (let job = 1; job <= jobs; job += 1) {
      expected += 1;
      const count = starts.get(`job-${job} ${slot}`) ?? 0;
      if (count === 1) ranOnce += 1;
      else if (count > 1) duplicated += 1;
      else missedPairs.push(`job-${job}@${(slot - first) / 1_000}s`);
    }
  }
  return { expected, ranOnce, duplicated, missed: missedPairs.length, missedPairs };
}

/** Slots that started more than once, anywhere in the run (the guarantee holds over the whole run). */
export function duplicatedAnywhere(replicas: readonly Worker<TopologyReplicaMessage>[]): string[] {
  return [...startsBySlot(replicas)].filter(([, count]) => count > 1).map(([key]) => key);
}

/** The first slot (epoch ms) at or after `fromMs` that some replica started, for any job. */
export function firstSlotRunFrom(replicas: readonly Worker<TopologyReplicaMessage>[], fromMs: number): number | undefined {
  const slots = [...startsBySlot(replicas).keys()].map((key) => Number(key.split(' ')[1])).filter((slot) => slot >= fromMs);
  return slots.length === 0 ? undefined : Math.min(...slots);
}

/** The log lines and failed skips of `replicas` at times in [fromMs, toMs). */
export function loggedBetween(
  replicas: readonly Worker<TopologyReplicaMessage>[],
  fromMs: number,
  toMs: number,
): { logs: Extract<TopologyReplicaMessage, { type: 'log' }>[]; failedSkips: Extract<TopologyReplicaMessage, { type: 'failed-skip' }>[] } {
  const all = replicas.flatMap((replica) => replica.received);
  return {
    logs: all.filter((m): m is Extract<TopologyReplicaMessage, { type: 'log' }> => m.type === 'log' && m.at >= fromMs && m.at < toMs),
    failedSkips: all.filter(
      (m): m is Extract<TopologyReplicaMessage, { type: 'failed-skip' }> => m.type === 'failed-skip' && m.at >= fromMs && m.at < toMs,
    ),
  };
}

/** Log lines grouped by their first words (numbers and names vary), with counts: for the report. */
export function summarizeLogs(logs: readonly { level: string; message: string }[]): string[] {
  const counts = new Map<string, number>();
  for (const { level, message } of logs) {
    const key = `${level}: ${message.replace(/"[^"]*"/g, '"…"').slice(0, 110)}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, count]) => `${count}× ${key}`);
}

/**
 * For each of `jobs` jobs: seconds from `fromMs` to the first slot after it that some replica of
 * `after` started, and which replica (index in `before`) started the job's last slot before `fromMs`.
 */
export function resumedPerJob(
  before: readonly Worker<TopologyReplicaMessage>[],
  after: readonly Worker<TopologyReplicaMessage>[],
  jobs: number,
  fromMs: number,
): { job: string; lastHolder: number | undefined; resumedAfterMs: number | undefined }[] {
  const startsOf = (replica: Worker<TopologyReplicaMessage>, job: string): number[] =>
    replica.received.flatMap((m) => (m.type === 'started' && m.job === job ? [Date.parse(m.slot)] : []));
  return Array.from({ length: jobs }, (_, i) => {
    const job = `job-${i + 1}`;
    let lastHolder: number | undefined;
    let lastSlot = Number.NEGATIVE_INFINITY;
    for (const [index, replica] of before.entries()) {
      for (const slot of startsOf(replica, job)) {
        if (slot < fromMs && slot > lastSlot) [lastSlot, lastHolder] = [slot, index];
      }
    }
    const next = after.flatMap((replica) => startsOf(replica, job)).filter((slot) => slot > fromMs);
    return { job, lastHolder, resumedAfterMs: next.length === 0 ? undefined : Math.min(...next) - fromMs };
  });
}
