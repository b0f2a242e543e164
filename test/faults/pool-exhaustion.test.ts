// Scenario 8: two replicas, each on a pool of 5 connections, fire the same 1,000 jobs in the same
// second, five bursts in a row. Every call settles, every job runs exactly once per burst across
// the replicas, none is an error skip, and memory does not keep growing from burst to burst.
import { describe, it } from 'vitest';
import { databaseUrl, dialectTargets, uniquePrefix } from '../support/dialects.js';
import { guardOn } from '../support/guards.js';
import { startWorker } from '../support/processes.js';
import { scenario } from './support/scenario.js';

const REPLICAS = 2;
const JOBS = 1_000;
const BURSTS = 5;
/** A burst must settle well within this: 1,000 acquires on 5 connections take well under a second here. */
const BURST_BOUND_MS = 60_000;
/**
 * Heap growth after a collection, from the first burst to the last, that still counts as bounded.
 * The first burst fills the pools, prepared statements and caches; after it, a burst of the same
 * jobs needs nothing new. (On MySQL, every connection keeping every batch size it had prepared
 * grew each replica's heap by 5 to 10 MB over the next four bursts.)
 */
const GROWTH_BOUND_MB = 5;

type PoolMessage =
  | { type: 'ready' }
  | {
      type: 'burst-done';
      ran: number[];
      skips: Record<string, number>;
      threw: number;
      errors: string[];
      ms: number;
      rssMb: number;
      heapMb: number;
    };
type BurstDone = Extract<PoolMessage, { type: 'burst-done' }>;

function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([promise, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);
}

describe.each(dialectTargets())('pool exhaustion on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    `${REPLICAS} replicas × ${JOBS} jobs in the same second on pools of 5, ${BURSTS} bursts`,
    async () => {
      await scenario('pool-exhaustion', target.name, async () => {
        const url = databaseUrl(target);
        const prefix = uniquePrefix();
        await guardOn(url, prefix).guard.migrate();
        const replicas = Array.from({ length: REPLICAS }, () =>
          startWorker<PoolMessage>('pool-worker.ts', [url, prefix, String(JOBS)], { exposeGc: true }),
        );
        await Promise.all(replicas.map((replica) => replica.next('ready')));
        const lost = {
          'never settled': 0,
          threw: 0,
          'ran by no replica': 0,
          'ran by two': 0,
          'error skips': 0,
          'memory still growing': 0,
        };
        const burstMs: number[] = [];
        const rss: number[][] = replicas.map(() => []);
        const heap: number[][] = replicas.map(() => []);
        try {
          for (let burst = 0; burst < BURSTS; burst += 1) {
            const slot = Math.floor(Date.now() / 1_000) * 1_000 + burst;
            for (const replica of replicas) replica.send({ type: 'burst', slot });
            const reports = await Promise.all(replicas.map((replica) => within(replica.next<BurstDone>('burst-done'), BURST_BOUND_MS)));
            const done = reports.filter((report): report is BurstDone => report !== undefined);
            lost['never settled'] += (reports.length - done.length) * JOBS;
            if (done.length < reports.length) break;
            const runsPerJob = new Map<number, number>();
            for (const job of done.flatMap((report) => report.ran)) runsPerJob.set(job, (runsPerJob.get(job) ?? 0) + 1);
            lost['ran by no replica'] += JOBS - runsPerJob.size;
            lost['ran by two'] += [...runsPerJob.values()].filter((count) => count > 1).length;
            lost.threw += done.reduce((sum, report) => sum + report.threw, 0);
            lost['error skips'] += done.reduce((sum, report) => sum + (report.skips['error'] ?? 0), 0);
            const logged = done.flatMap((report) => report.errors);
            if (logged.length > 0) console.error(logged.slice(0, 5).join('\n'));
            burstMs.push(Math.max(...done.map((report) => report.ms)));
            done.forEach((report, index) => {
              rss[index]?.push(report.rssMb);
              heap[index]?.push(report.heapMb);
            });
          }
        } finally {
          for (const replica of replicas) replica.send({ type: 'exit' });
          await Promise.all(replicas.map((replica) => within(replica.exited, 10_000)));
        }
        const growth = heap.map((series) => (series.at(-1) ?? 0) - (series[0] ?? 0));
        lost['memory still growing'] = growth.filter((mb) => mb > GROWTH_BOUND_MB).length;
        return {
          done: `${REPLICAS} replicas, each on a pool of 5${target.name === 'sqlite' ? ' (SQLite: one connection)' : ''}, fire the same ${JOBS} jobs at once, ${BURSTS} bursts`,
          times: REPLICAS * JOBS * BURSTS,
          lost,
          figures:
            `bursts settled in ${burstMs.map((ms) => `${Math.round(ms)} ms`).join(', ')}; per replica after each burst and a GC, heap ` +
            `${heap.map((series) => series.map((mb) => mb.toFixed(1)).join('→')).join(' and ')} MB (bound: +${GROWTH_BOUND_MB} MB from the first burst), ` +
            `RSS ${rss.map((series) => series.map((mb) => mb.toFixed(0)).join('→')).join(' and ')} MB`,
        };
      });
    },
  );
});
