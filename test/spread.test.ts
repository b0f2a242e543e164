// `spread` (issue 34): a job's runs start a stable offset after their slot, computed from its
// name (the same in every process and after a restart); every replica still races for the
// nominal slot, so each slot runs once; ctx.slot and the history's slot are the nominal time; and
// the slot ledger (guard.slots(), `cronguard slots`, the `late` event) counts no spread run late.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { spreadOffsetMs } from '../src/core/spread.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { cronguard } from './support/cronguard-cli.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { databaseUrl, dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';
import { startWorker, type Worker } from './support/processes.js';

type SpreadMessage =
  | { type: 'ready'; pid: number }
  | { type: 'ran'; pid: number; slot: string | null; start: number }
  | { type: 'late'; pid: number; slot: string; delayMs: number }
  | { type: 'exiting'; pid: number };

/** Every two seconds, spread over 1.9 s: this name's offset is 1,264 ms, past lateAfter (1 s) without spread. */
const EXPRESSION = '*/2 * * * * *';
const SPREAD = '1900ms';
const JOB = 'spread-d';
const OFFSET_MS = spreadOffsetMs(JOB, 1_900);
/** How far past its offset a run may start on a busy two-core machine and still count: lateAfter. */
const TOLERANCE_MS = 1_000;

/** `count` replica processes on the tables, started together, running for `runForMs`; resolves with their messages once all exited. */
async function replicas(
  url: string,
  prefix: string,
  count: number,
  runForMs: number,
  together?: () => Promise<void>,
): Promise<SpreadMessage[]> {
  const workers: Worker<SpreadMessage>[] = [];
  for (let index = 0; index < count; index += 1) {
    workers.push(startWorker<SpreadMessage>('spread-replica.ts', [url, prefix, JOB, EXPRESSION, SPREAD, String(runForMs)]));
  }
  await Promise.all(workers.map((worker) => worker.next('ready')));
  await together?.();
  for (const worker of workers) worker.send({ type: 'start' });
  await Promise.all(workers.map((worker) => worker.next('exiting')));
  await Promise.all(workers.map((worker) => worker.exited));
  return workers.flatMap((worker) => [...worker.received]);
}

describe('spread', () => {
  it('its offset is a function of the name and the window only, inside the window', () => {
    expect(OFFSET_MS).toBe(1_264);
    expect(spreadOffsetMs(JOB, 1_900)).toBe(OFFSET_MS);
    expect(spreadOffsetMs(JOB, null)).toBe(0);
    for (const name of ['a', 'b', 'nightly-report', 'ü-job']) {
      const offset = spreadOffsetMs(name, 30_000);
      expect(offset).toBeGreaterThanOrEqual(0);
      expect(offset).toBeLessThan(30_000);
      expect(Number.isInteger(offset)).toBe(true);
    }
  });
});

eachDialectAtOnce(
  'spread: replicas in separate processes, then a restart',
  async ({ target, expect: check, together }) => {
    const { guard, url, prefix } = await migratedGuard(target);
    // Three replicas, then two new processes (a restart): each slot once over both rounds.
    const first = await replicas(url, prefix, 3, 5_500, together);
    const second = await replicas(url, prefix, 2, 4_500);
    const ran = [...first, ...second].filter((message): message is Extract<SpreadMessage, { type: 'ran' }> => message.type === 'ran');
    check(ran.length).toBeGreaterThanOrEqual(3);
    // Each slot once, across the processes of both rounds.
    const slots = ran.map((message) => message.slot);
    check(new Set(slots).size).toBe(slots.length);
    // A run a stalled machine started more than lateAfter past its offset is late, and the ledger
    // must count it so: at most one such stall is put down to the machine (without spread, every
    // run of this job would be late: its offset is past lateAfter).
    const stalledStarts = ran.filter((message) => message.start - Date.parse(message.slot ?? '') >= OFFSET_MS + TOLERANCE_MS);
    check(stalledStarts.length, JSON.stringify(stalledStarts)).toBeLessThanOrEqual(1);
    for (const message of ran) {
      // ctx.slot is the nominal slot: a whole even second.
      const slot = Date.parse(message.slot ?? '');
      check(slot % 2_000).toBe(0);
      // The run starts the offset after it, in whichever process and round, never before.
      check(message.start - slot).toBeGreaterThanOrEqual(OFFSET_MS - 20);
    }
    // More than one process ran the job (the second round's are new ones): the same offset in each.
    check(new Set(ran.map((message) => message.pid)).size).toBeGreaterThanOrEqual(2);
    // The history: the nominal slot and the start, started_at − slot the offset.
    const { runs } = await guard.history({ job: JOB });
    check(runs.length).toBe(ran.length);
    const delays = runs.map((run) => run.startedAt.getTime() - (run.slot as Date).getTime());
    for (const run of runs) {
      check(run.slot?.getTime()).toBeDefined();
      check(slots).toContain(run.slot?.toISOString());
    }
    for (const delay of delays) check(delay).toBeGreaterThanOrEqual(OFFSET_MS - 50);
    // Late by the ledger's rule (started more than lateAfter past the offset): only a stalled run.
    const late = delays.filter((delay) => delay > OFFSET_MS + TOLERANCE_MS).length;
    check(late, `delays ${delays.join(', ')} ms`).toBeLessThanOrEqual(1);
    // The ledger counts no other slot late (guard.slots(), the CLI), nor did any process's `late` event.
    const [ledger] = await guard.slots({ job: JOB, since: '1m' });
    check(ledger?.counts.late).toBe(late);
    check(ledger?.counts.succeeded).toBeGreaterThanOrEqual(ran.length - 1 - late);
    for (const slot of ledger?.slots ?? []) if (slot.delayMs !== null) check(slot.delayMs).toBeGreaterThanOrEqual(OFFSET_MS - 50);
    const listed = await cronguard(['slots', '--job', JOB, '--since', '1m', '--json', '--database', url, '--table-prefix', prefix]);
    const [json] = JSON.parse(listed.stdout) as { counts: { late: number; succeeded: number } }[];
    check(json?.counts.late).toBe(late);
    check(json?.counts.succeeded).toBeGreaterThanOrEqual(ran.length - 1 - late);
    check([...first, ...second].filter((message) => message.type === 'late').length).toBeLessThanOrEqual(late);
  },
  // Nine processes start at once on two cores: most of the time is theirs.
  120_000,
);

describe.each(dialectTargets().filter((target) => target.name === 'sqlite'))('spread on $name', (target) => {
  it('refuses what is not a duration, and a window as long as the gap between slots', async () => {
    const guard = createGuard({ database: databaseUrl(target) });
    closeWhenTestEnds(() => guard.close());
    const job = { name: 'x', lockAtMostFor: '10s' };
    const noop = () => undefined;
    expect(() => guard.schedule('* * * * *', { ...job, spread: 'soon' }, noop)).toThrow(
      new TypeError(`Expected \`spread\` of job "x" to be a duration like '30s' (or 0 for none), got "soon"`),
    );
    expect(() => guard.schedule('* * * * *', { ...job, spread: -5 }, noop)).toThrow(/Expected `spread` of job "x" to be a duration/);
    expect(() => guard.schedule('* * * * *', { ...job, spread: '1m' }, noop)).toThrow(
      new TypeError(
        'Expected `spread` of job "x" to be shorter than the time between two of its slots (60000 ms), got "1m" (60000 ms): ' +
          'each run would start after the next slot',
      ),
    );
    expect(() => guard.schedule('* * * * * *', { ...job, spread: '1s' }, noop)).toThrow(
      /shorter than the time between two of its slots \(1000 ms\)/,
    );
    // 0 is none; a window shorter than the gap is taken.
    await guard.schedule('* * * * *', { ...job, spread: 0 }, noop).destroy();
    await guard.schedule('* * * * *', { ...job, name: 'y', spread: '59s' }, noop).destroy();
  });

  it('shutdown cancels a fire waiting for its offset: no run, and shutdown does not wait for it', async () => {
    const { guard } = await migratedGuard(target);
    const runs: number[] = [];
    guard.schedule(EXPRESSION, { name: JOB, lockAtMostFor: '10s', spread: SPREAD }, () => void runs.push(Date.now()));
    // Just after a slot: its fire is waiting for the offset (1,264 ms). A loaded machine may wake
    // the test too late for that (the run started): then the next slot.
    let slot = 0;
    let before = 0;
    for (let attempt = 0; attempt < 3; attempt += 1) {
      slot = Math.ceil((Date.now() + 100) / 2_000) * 2_000;
      await sleep(slot + 150 - Date.now());
      before = Date.now();
      if (before < slot + OFFSET_MS - 400 && !runs.some((at) => at >= slot)) break;
    }
    expect(before - slot, 'a try that began within the offset').toBeLessThan(OFFSET_MS - 400);
    await shutdown(guard);
    expect(Date.now() - before).toBeLessThan(OFFSET_MS - 150);
    await sleep(Math.max(slot + OFFSET_MS + 300 - Date.now(), 0));
    expect(runs.filter((at) => at >= slot)).toEqual([]);
  });
});

async function shutdown(guard: Guard): Promise<void> {
  await guard.shutdown({ timeout: '10s' });
}

describe.each(dialectTargets())('spread on tables before migration 008 on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    'declares the schedule without spread_ms (the job still spreads), and the ledger reads it, with no warning',
    async () => {
      const { url, prefix, guard: migrating } = await migratedGuard(target);
      await migrating.close();
      // The tables as 0.x before `spread` left them: 007 applied, no spread_ms.
      const raw = await openRaw(target.name, url);
      try {
        await raw.exec(`ALTER TABLE ${prefix}jobs DROP COLUMN spread_ms`);
        await raw.query(`DELETE FROM ${prefix}schema_migrations WHERE name = ?`, ['008_spread']);
      } finally {
        await raw.close();
      }
      const { guard, logger } = guardOn(url, prefix);
      const task = guard.schedule(EXPRESSION, { name: JOB, lockAtMostFor: '10s', spread: SPREAD }, () => undefined);
      await expect.poll(async () => (await guard.slots({ job: JOB })).map((ledger) => ledger.expression)).toEqual([EXPRESSION]);
      await task.destroy();
      expect((await guard.versions()).schema.database).toBe(7);
      expect([...logger.warnings, ...logger.errors]).toEqual([]);
    },
  );
});
