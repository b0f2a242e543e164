// A rolling deploy from 0.1.0: two replicas of the packed 0.1.0 release and two of the working tree,
// each its own OS process, share the tables while the new ones migrate them, then the old ones stop.
import { describe } from 'vitest';
import { uniquePrefix } from './support/dialects.js';
import { ownDatabaseUrl } from './support/own-database.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn } from './support/guards.js';
import { unpackOldRelease } from './support/old-release.js';
import { droppedByAll, startWorker, type Worker } from './support/processes.js';
import { everyRefusalExplained, runsWithoutHold, type LockHold, type ReportedRefusal } from './support/lock-holds.js';

type Message =
  | { type: 'ready'; pid: number }
  | { type: 'ran'; pid: number; label: string; slot: string; start: number }
  | ({ type: 'held'; pid: number } & LockHold)
  | ({ type: 'skipped'; pid: number } & ReportedRefusal)
  | { type: 'log'; line: string }
  | { type: 'exiting'; pid: number };
type Ran = Extract<Message, { type: 'ran' }>;

const runsOf = (replicas: Worker<Message>[]): Ran[] =>
  replicas.flatMap((replica) => replica.received.filter((message): message is Ran => message.type === 'ran'));
const linesOf = (replicas: Worker<Message>[]): string[] =>
  replicas.flatMap((replica) => replica.received.flatMap((message) => (message.type === 'log' ? [message.line] : [])));

// The three dialects at once (each its own tables and processes): the scenario waits on every-second ticks.
describe('a rolling deploy from 0.1.0', () => {
  eachDialectAtOnce(
    'runs each slot once while old and new replicas share the tables and the new ones migrate, then the new ones carry on',
    async ({ target, expect, together }) => {
      const url = await ownDatabaseUrl(target);
      const prefix = uniquePrefix();
      const old = unpackOldRelease();
      const start = (version: string, label: string) => startWorker<Message>('upgrade-replica.ts', [version, url, prefix, label]);
      const stop = async (replicas: Worker<Message>[]) => {
        for (const replica of replicas) replica.child.kill('SIGTERM');
        expect(await Promise.all(replicas.map((replica) => replica.exited))).toEqual(replicas.map(() => 0));
      };
      const ranSince = (replicas: Worker<Message>[], label: string, after: number) =>
        runsOf(replicas).filter((run) => run.label === label && Date.parse(run.slot) > after).length;

      // Before the deploy: 0.1.0 everywhere; its migrate() creates the tables.
      const olds = [start(old.entry, 'old'), start(old.entry, 'old')];
      await Promise.all(olds.map((replica) => replica.next('ready')));
      await together();
      await expect.poll(() => ranSince(olds, 'old', 0), { timeout: 20_000 }).toBeGreaterThanOrEqual(2);

      // The deploy: new replicas start, each calling migrate() while the old ones run their ticks.
      const news = [start('current', 'new'), start('current', 'new')];
      const all = [...olds, ...news];
      await Promise.all(news.map((replica) => replica.next('ready')));
      const mixedFrom = Date.now();
      await expect
        .poll(() => runsOf(all).filter((run) => Date.parse(run.slot) > mixedFrom).length, { timeout: 20_000 })
        .toBeGreaterThanOrEqual(4);

      // An old replica restarting mid-deploy (a crash, a node drained) calls 0.1.0's migrate() on the
      // migrated tables, and must start.
      const restarted = start(old.entry, 'old');
      olds.push(restarted);
      all.push(restarted);
      await restarted.next('ready');

      // The old ones stop; the new ones carry on alone.
      await stop(olds);
      const aloneFrom = Date.now();
      await expect.poll(() => ranSince(news, 'new', aloneFrom), { timeout: 20_000 }).toBeGreaterThanOrEqual(3);
      await stop(news);

      const runs = runsOf(all);
      const perSlot = new Map<string, number>();
      for (const run of runs) perSlot.set(run.slot, (perSlot.get(run.slot) ?? 0) + 1);
      expect([...perSlot].filter(([, count]) => count > 1)).toEqual([]);
      // Every whole second between the first slot and the last ran: none lost in the hand-over. A
      // second whose fire node-cron dropped in every replica then running (a stalled machine) was
      // fired by nobody; one whose every refusal the runs explain ('locked' while another second's
      // run held the lock, 'slot-done' once a later second's run had started) was fired late.
      const holds = all.flatMap((replica) => replica.received.flatMap((message) => (message.type === 'held' ? [message] : [])));
      const refusals = all.flatMap((replica) => replica.received.flatMap((message) => (message.type === 'skipped' ? [message] : [])));
      // Every run's hold was reported, in both versions (the rule rests on them).
      expect(runsWithoutHold(runs, holds)).toEqual([]);
      const times = runs.map((run) => Date.parse(run.slot)).sort((a, b) => a - b);
      const missing: string[] = [];
      for (let t = (times[0] ?? 0) + 1_000; t < (times.at(-1) ?? 0); t += 1_000) {
        const slot = new Date(t).toISOString();
        if (!perSlot.has(slot) && !droppedByAll(all, t) && !everyRefusalExplained(slot, refusals, holds, runs)) missing.push(slot);
      }
      expect(missing, JSON.stringify({ refusals: refusals.filter((refusal) => missing.includes(refusal.slot ?? '')), holds })).toEqual([]);
      expect(linesOf(all)).toEqual([]);

      // The history: one row per run, each finished, whichever version wrote it.
      const { guard } = guardOn(url, prefix);
      const history = (await guard.history({ job: 'tick', limit: 1_000 })).runs;
      expect(history.map((run) => run.status).sort()).toEqual(runs.map(() => 'succeeded'));
      expect(new Set(history.map((run) => run.slot?.toISOString()))).toEqual(new Set(perSlot.keys()));
      // Which version each holder runs: each new replica that took the lock recorded its version
      // (a replica that only lost writes nothing); the old ones, which have no such table, none.
      const report = await guard.versions();
      const newHolders = new Set(runs.filter((run) => run.label === 'new').map((run) => `new-${run.pid}`));
      expect(new Set(report.replicas.map((replica) => replica.lockedBy))).toEqual(newHolders);
      expect(report.replicas.every((replica) => replica.version === report.package)).toBe(true);
    },
    180_000,
  );
});
