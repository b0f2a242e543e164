// What a failover did to the runs: from what the replica processes report (test/fixtures/failover-replica.ts)
// and the history rows the promoted standby holds.

/** What test/fixtures/failover-replica.ts sends its parent. */
export type FailoverReplicaMessage =
  | { type: 'ready'; pid: number }
  | { type: 'started'; job: string; pid: number; slot: string; start: number }
  | { type: 'ran'; job: string; pid: number; slot: string; start: number; end: number }
  | { type: 'log'; level: 'warn' | 'error'; message: string; at: number; pid: number }
  | { type: 'exiting'; pid: number };

type Ran = Extract<FailoverReplicaMessage, { type: 'ran' }>;
type Log = Extract<FailoverReplicaMessage, { type: 'log' }>;

export interface HistoryRow {
  readonly job_name: string;
  readonly slot: Date | null;
  readonly locked_by: string;
  readonly status: string;
}

export interface FailoverFigures {
  /** (job, slot) pairs of the every-second short jobs in the measured window. */
  readonly slotsExpected: number;
  readonly slotsRanOnce: number;
  /** (job, slot) pairs that ran more than once (any job). */
  readonly duplicated: number;
  /** Executions of one job that ran at the same time as another execution of it. */
  readonly overlapping: number;
  /** Short-job slots in the window no replica ran. */
  readonly missed: number;
  /** Runs that ended on a replica and have no history row on the promoted standby. */
  readonly historyLost: number;
  /** Runs that ended on a replica whose history row says 'running' (the finishing update was lost). */
  readonly historyUnfinished: number;
  /** Milliseconds from the kill of the primary to the first run that started after it, per job. */
  readonly resumedAfterMs: Readonly<Record<string, number | undefined>>;
  /** What the guard logged from the kill on: each distinct line (numbers blanked) with its count. */
  readonly logged: readonly string[];
}

const key = (job: string, slot: string): string => `${job} ${new Date(slot).getTime()}`;

export function measureFailover(
  messages: readonly FailoverReplicaMessage[],
  history: readonly HistoryRow[],
  window: { from: number; to: number; killedAt: number; shortJobs: readonly string[] },
): FailoverFigures {
  const ran = messages.filter((message): message is Ran => message.type === 'ran');
  const bySlot = new Map<string, Ran[]>();
  for (const run of ran) bySlot.set(key(run.job, run.slot), [...(bySlot.get(key(run.job, run.slot)) ?? []), run]);
  const duplicated = [...bySlot.values()].filter((runs) => runs.length > 1).length;

  let overlapping = 0;
  for (const job of new Set(ran.map((run) => run.job))) {
    const runs = ran.filter((run) => run.job === job).sort((a, b) => a.start - b.start);
    let latestEnd = Number.NEGATIVE_INFINITY;
    for (const run of runs) {
      if (run.start < latestEnd) overlapping += 1;
      latestEnd = Math.max(latestEnd, run.end);
    }
  }

  let slotsExpected = 0;
  let slotsRanOnce = 0;
  let missed = 0;
  for (let second = Math.ceil(window.from / 1_000) * 1_000; second <= window.to; second += 1_000) {
    for (const job of window.shortJobs) {
      slotsExpected += 1;
      const runs = bySlot.get(key(job, new Date(second).toISOString()))?.length ?? 0;
      if (runs === 0) missed += 1;
      if (runs === 1) slotsRanOnce += 1;
    }
  }

  const rows = new Map<string, HistoryRow>();
  for (const row of history) if (row.slot !== null) rows.set(`${row.job_name} ${row.slot.getTime()} ${row.locked_by}`, row);
  let historyLost = 0;
  let historyUnfinished = 0;
  for (const run of ran) {
    const row = rows.get(`${key(run.job, run.slot)} replica-${run.pid}`);
    if (row === undefined) historyLost += 1;
    else if (row.status === 'running') historyUnfinished += 1;
  }

  const resumedAfterMs: Record<string, number | undefined> = {};
  for (const job of new Set(ran.map((run) => run.job))) {
    const first = ran.filter((run) => run.job === job && run.start > window.killedAt).sort((a, b) => a.start - b.start)[0];
    resumedAfterMs[job] = first === undefined ? undefined : first.start - window.killedAt;
  }

  const lines = new Map<string, number>();
  for (const log of messages.filter((message): message is Log => message.type === 'log' && message.at >= window.killedAt)) {
    const shape = `${log.level}: ${log.message.replace(/\d[\d.:TZ-]*/g, 'N').slice(0, 200)}`;
    lines.set(shape, (lines.get(shape) ?? 0) + 1);
  }
  const logged = [...lines].map(([line, count]) => `${count}× ${line}`);

  return { slotsExpected, slotsRanOnce, duplicated, overlapping, missed, historyLost, historyUnfinished, resumedAfterMs, logged };
}
