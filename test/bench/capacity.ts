// Figure 9: what the contention figure's decisions per second mean in jobs × replicas, and the
// plan past one database. Computed from figure 5 of the same run; nothing here is measured anew.
import type { DialectName } from '../../src/index.js';
import type { ContentionFigure } from './contention.js';

/** The issue's example deployment. */
const EXAMPLE_JOBS_PER_MINUTE = 10_000;
const EXAMPLE_REPLICAS = 50;
const REPLICA_COUNTS = [3, 10, 50];

const thousands = (n: number): string => Math.round(n).toLocaleString('en-US');

/**
 * Every replica attempts every job at every tick, so a (job, slot) costs one decision per replica:
 * one win and replicas − 1 losses. Jobs a minute at R replicas ≈ 60 × decisions/s ÷ R. The
 * contention figure's mix (1 win in 16) has more wins than a 50-replica mix, and wins cost more
 * than losses, so for more replicas than 16 this estimate errs low.
 */
function jobsPerMinute(decisionsPerSecond: number, replicas: number): number {
  return (60 * decisionsPerSecond) / replicas;
}

export function capacityLines(results: readonly { dialect: DialectName; tickContention: ContentionFigure }[]): string[] {
  // Jobs come a tick at a time (every job due at a second fires together), so the capacity is read
  // from figure 5's tick-at-a-time column.
  const servers = results
    .filter((result) => result.dialect !== 'sqlite')
    .map(({ dialect, tickContention }) => ({ dialect, contention: tickContention }));
  const needed = (EXAMPLE_JOBS_PER_MINUTE * EXAMPLE_REPLICAS) / 60;
  return [
    `From figure 5, a tick at a time (jobs come that way: every job due at a second fires together): decisions per second one server sustained here, with the ${servers[0]?.contention.processes ?? 8} client processes ` +
      'on the same 2 cores as the server (a dedicated server does better; that is not measured here). A (job, slot) costs one decision per ' +
      'replica that schedules it: one win, the rest losses. Jobs a minute at R replicas ≈ 60 × decisions/s ÷ R (an underestimate above 16 ' +
      `replicas, whose mix has fewer, dearer wins). The example, ${thousands(EXAMPLE_JOBS_PER_MINUTE)} jobs a minute on ${EXAMPLE_REPLICAS} replicas, ` +
      `needs ${thousands(needed)} decisions per second.`,
    '',
    `| dialect | decisions per second | guarded executions per second (each raced by ${(servers[0]?.contention.processes ?? 0) * (servers[0]?.contention.contenders ?? 0)}) | ${REPLICA_COUNTS.map((r) => `jobs a minute at ${r} replicas`).join(' | ')} | ${thousands(EXAMPLE_JOBS_PER_MINUTE)} jobs/min × ${EXAMPLE_REPLICAS} replicas |`,
    `| --- | --- | --- | ${REPLICA_COUNTS.map(() => '---').join(' | ')} | --- |`,
    ...servers.map(({ dialect, contention }) => {
      const d = contention.decisionsPerSecond;
      const verdict = d >= needed ? 'fits' : `**${(needed / d).toFixed(1)}× short** here: see the plan below`;
      return `| ${dialect} | ${thousands(d)} | ${thousands(d / (contention.processes * contention.contenders))} | ${REPLICA_COUNTS.map((r) => thousands(jobsPerMinute(d, r))).join(' | ')} | ${verdict} |`;
    }),
    '',
    '### What limits scale first, and the plan past one database',
    '',
    '1. **Losing attempts, which grow with jobs × replicas.** In the example 98% of attempts lose. A loser is one read-only statement on ' +
      "PostgreSQL (no WAL, no row lock: figure 3) and one UPDATE that matches nothing on MySQL, so the server's CPU is the budget. The " +
      'cheapest lever is fewer contenders: schedule the jobs on 2 or 3 replicas (enough for availability; the guard keeps them to one run ' +
      'per slot) instead of all 50, which divides the load by 17 to 25.',
    '2. **Connections.** A guard that opens its own pool keeps up to 10 connections per replica (idle ones for 70 s): 50 replicas can hold ' +
      '500, and PostgreSQL allows 100 by default. The guard holds a connection only for one statement, never during a job, so pass it a ' +
      'pool of 2 or 3, or put PgBouncer in transaction mode in front (`preparedStatements: false` below PgBouncer 1.21).',
    '3. **Tick bursts.** Every `* * * * *` job fires at second 0 on every replica. Spreading jobs over the minute (a seconds field derived ' +
      'from the job name) turns the spike into a flat rate the server can absorb.',
    '4. **History.** Each win inserts and finishes one run row: 10,000 runs a minute is 14 million rows a day. Set `historyRetention` so ' +
      'the guard prunes, and on PostgreSQL let autovacuum keep up with the updates.',
    '5. **Past one database.** Locks of different jobs never interact, so jobs shard by name: one guard per database and a stable hash of ' +
      'the job name choosing the guard. No coordination crosses shards, and each shard keeps every guarantee.',
    '',
  ];
}
