// guard.schedule on the DST nights of Europe/Berlin, in real processes whose clock faketime sets
// a little before each moment that matters (and runs twice as fast), TZ=Europe/Berlin, on
// every dialect: every real 5 s of the repeated hour fire once, in both of its occurrences; a
// daily 02:30 fires at its first occurrence only on the fall-back night, and at the jump (03:00
// CEST) on the spring-forward night. node-cron 4.6 alone skipped the first occurrence of the
// repeated hour (and fired 02:30 at its second), and never fired 02:30 on the spring-forward night.
import { describe } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { withGuardOn } from './support/guards.js';
import { startWorker } from './support/processes.js';

type Message = { type: 'ready'; pid: number; now: string } | { type: 'ran'; job: string; slot: string } | { type: 'exiting'; pid: number };

/**
 * faketime runs the worker's clocks this many times as fast: a window of 45 s takes 22.5 s. At 5×
 * a 5 s slot was one real second, and a worker that lost the CPU that long in a full run on 2
 * cores missed a fire (4 of 5 slots): a gap of the machine's, not of the DST night's.
 */
const RATE = 2;
/**
 * The worker's clock starts this long before the moment (process start and the guard's first
 * statements take a few faked seconds): doubled for another try when the worker was not ready 10 s
 * before the moment (a loaded machine), up to 120 s.
 */
const LEAD_MS = [30_000, 60_000, 120_000];
/** The worker must be ready (its tasks scheduled) this long before the moment. */
const READY_BEFORE_MS = 10_000;
/** And stops this long after it. */
const TAIL_MS = 15_000;

const JOBS = { every5s: '*/5 * * * * *', daily0230: '30 2 * * *' } as const;

interface Window {
  readonly name: string;
  /** The moment (UTC) the window is around. */
  readonly at: string;
  /** The slots (UTC) the daily 02:30 job must run in the window. */
  readonly daily: string[];
}

const WINDOWS: Window[] = [
  { name: 'fall-back night, the first 02:30 (CEST)', at: '2026-10-25T00:30:00.000Z', daily: ['2026-10-25T00:30:00.000Z'] },
  { name: 'fall-back night, 03:00 CEST becomes 02:00 CET', at: '2026-10-25T01:00:00.000Z', daily: [] },
  { name: 'fall-back night, the second 02:30 (CET)', at: '2026-10-25T01:30:00.000Z', daily: [] },
  { name: 'spring-forward night, 02:00 CET becomes 03:00 CEST', at: '2026-03-29T01:00:00.000Z', daily: ['2026-03-29T01:00:00.000Z'] },
];

/** One worker under faketime around `window`: the slots each job ran, and the worker's clock when it was ready. */
async function runAround(
  url: string,
  prefix: string,
  window: Window,
  leadMs: number,
): Promise<{ ready: number; ran: Record<string, number[]> }> {
  const at = Date.parse(window.at);
  const offsetS = Math.round((at - leadMs - Date.now()) / 1_000);
  // Job names of their own per window and lead (a second try must not find its slots done).
  const suffix = `${window.at.replace(/\D/g, '').slice(0, 12)}${leadMs / 1_000}`;
  const worker = startWorker<Message>(
    'dst-replica.ts',
    [
      url,
      prefix,
      new Date(at + TAIL_MS).toISOString(),
      ...Object.entries(JOBS).map(([name, expression]) => `${name}-${suffix}=${expression}`),
    ],
    { clockOffset: `${offsetS}s x${RATE}`, env: { TZ: 'Europe/Berlin' } },
  );
  const ready = await worker.next<Extract<Message, { type: 'ready' }>>('ready');
  await worker.next('exiting');
  await worker.exited;
  const ran: Record<string, number[]> = Object.fromEntries(Object.keys(JOBS).map((name) => [name, []]));
  for (const message of worker.received) {
    if (message.type === 'ran') ran[message.job.replace(/-\d+$/, '')]?.push(Date.parse(message.slot));
  }
  return { ready: Date.parse(ready.now), ran };
}

const iso = (ms: number): string => new Date(ms).toISOString();

describe('guard.schedule on the DST nights of Europe/Berlin (TZ=Europe/Berlin, under faketime)', () => {
  eachDialectAtOnce(
    'runs every real 5 s once across each transition, and a daily 02:30 once per night (the first 02:30, or at the jump)',
    async ({ target, expect, together }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      await withGuardOn(url, prefix, (guard) => guard.migrate());
      await together();
      // The windows side by side, each in its own worker (job names of its own): four 22 s windows
      // one after the other were the longest file of the suite.
      const results = await Promise.all(
        WINDOWS.map(async (window) => {
          const at = Date.parse(window.at);
          let result = await runAround(url, prefix, window, LEAD_MS[0] as number);
          for (const leadMs of LEAD_MS.slice(1)) {
            if (result.ready < at - READY_BEFORE_MS) break;
            result = await runAround(url, prefix, window, leadMs);
          }
          return result;
        }),
      );
      for (const [index, window] of WINDOWS.entries()) {
        const at = Date.parse(window.at);
        const { ready, ran } = results[index] as Awaited<ReturnType<typeof runAround>>;
        // The worker was up well before the moment: the window shows both sides of it.
        expect(ready, `${window.name}: the worker's clock when it was ready`).toBeLessThan(at - READY_BEFORE_MS);
        const every5s = ran['every5s'] ?? [];
        const first = Math.min(...every5s);
        const last = Math.max(...every5s);
        const contiguous = Array.from({ length: (last - first) / 5_000 + 1 }, (_, index) => iso(first + index * 5_000));
        expect(every5s.map(iso), `${window.name}: every real 5 s from the first fire to the last, once`).toEqual(contiguous);
        expect(first, `${window.name}: fired before the moment`).toBeLessThanOrEqual(at - 5_000);
        expect(last, `${window.name}: fired after the moment`).toBeGreaterThanOrEqual(at + 5_000);
        expect((ran['daily0230'] ?? []).map(iso), `${window.name}: the daily 02:30`).toEqual(window.daily);
      }
    },
    360_000,
  );
});
