// Scenario 5: replicas whose app clocks are off by ±30 s (Debian's faketime), on the dialects that compare on
// the database's clock: no slot runs twice, and every second of real time has its one run.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { databaseUrl, dialectTargets, uniquePrefix } from '../support/dialects.js';
import { guardOn } from '../support/guards.js';
import type { ReplicaMessage } from '../support/cron-replica-messages.js';
import { startWorker, type Worker } from '../support/processes.js';
import { scenario } from './support/scenario.js';

function hasFaketime(): boolean {
  try {
    execFileSync('faketime', ['-f', '+0s', 'true']);
    return true;
  } catch {
    return false;
  }
}
const faketime = hasFaketime();
if (!faketime && process.env.CI === 'true') throw new Error('faketime is missing under CI=true: .ci/run installs it');
if (!faketime) console.error('\n*** cronguard: clock-skew tests are SKIPPED: faketime not found (apt-get install -y faketime) ***\n');

// Not SQLite: its now() is computed in each replica's process, so a skewed replica compares on its
// skewed clock (SQLite is for replicas on one machine, which share one clock). RELIABILITY.md says so.
const targets = dialectTargets().filter((target) => target.name !== 'sqlite');

describe.each(targets)('replicas with skewed clocks on $name', (target) => {
  it.skipIf(target.serverUrl === null || !faketime)(
    'run no slot twice and leave no second of real time without its run',
    async () => {
      await scenario('clock-skew', target.name, async () => {
        const url = databaseUrl(target);
        const prefix = uniquePrefix();
        const { guard } = guardOn(url, prefix);
        await guard.migrate();
        const received: { at: number; slot: string; replica: number }[] = [];
        const offsets = ['+30s', '+0s', '-30s'];
        // The fast replica starts first and runs a slot before the others start. Which replica wins a
        // race is otherwise up to timing, and a replica that released the lock last skips its probe and
        // tends to keep winning: a fast replica that starts late may never run, and then there is no
        // fast clock to report. Once it has run, its slots are ahead of the others' (the slot watermark
        // follows the fastest clock), so what is tested is that the others' attempts, a second apart on
        // real time but 30 s behind in slot labels, never run the same real second again. It runs
        // longer than the others, so that they stop while it still holds the watermark.
        const start = (clockOffset: string, runForMs: number): Worker<ReplicaMessage> => {
          const replica = startWorker<ReplicaMessage>('cron-replica.ts', [url, prefix, 'schedule', '200', '0', String(runForMs)], {
            clockOffset,
          });
          const index = offsets.indexOf(clockOffset);
          replica.child.on('message', (message: ReplicaMessage) => {
            // When the run started, by this process's (true) clock.
            if (message.type === 'started') received.push({ at: Date.now(), slot: message.slot, replica: index });
          });
          return replica;
        };
        const fast = start('+30s', 12_000);
        await fast.next('started');
        const replicas = [fast, ...offsets.slice(1).map((offset) => start(offset, 9_000))];
        await Promise.all(replicas.map((replica) => replica.exited));

        const slots = received.map((run) => run.slot);
        const seconds = received.map((run) => Math.floor(run.at / 1_000)).sort((a, b) => a - b);
        const first = seconds[0] ?? 0;
        const last = seconds.at(-1) ?? 0;
        expect(last - first, 'the replicas ran for at least 6 s').toBeGreaterThanOrEqual(6);
        const perSecond = new Map<number, number>();
        for (const second of seconds) perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
        let gaps = 0;
        for (let second = first; second <= last; second += 1) if (!perSecond.has(second)) gaps += 1;
        // doctor sees the fast clock: slots that started before their time on the database clock.
        const [diagnosis] = await guard.doctor();
        const fastClockReported = diagnosis?.problems.some((problem) => /clock of replica-\d+ is fast/.test(problem)) === true;
        const byReplica = offsets.map((offset, index) => `${offset}: ${received.filter((run) => run.replica === index).length}`);
        return {
          done: '3 node-cron replicas (every second) at +30 s, 0, −30 s; the +30 s one runs a slot first, the others then race it for 9 s',
          times: received.length,
          lost: {
            'slot run twice': slots.length - new Set(slots).size,
            'second without a run': gaps,
            'second with two runs': [...perSecond.values()].filter((count) => count > 1).length,
            'fast clock not reported by doctor': fastClockReported ? 0 : 1,
          },
          // The slot watermark follows the fastest clock: see docs/guarantees.md.
          figures: `runs per replica ${byReplica.join(', ')}; doctor: slots ran up to ${Math.round((diagnosis?.slotAheadMs ?? 0) / 1_000)} s ahead of the database clock`,
        };
      });
    },
    60_000,
  );
});
