// The slot ledger's walk over a long range gives the event loop back: `guard.slots()` and a job
// page over a week of a once-every-3-seconds schedule (10,000 fires of node-cron's matcher, each
// 50-300 µs: 0.5-3 s in one go before) keep a timer of the same process on time, within a bound
// tied to the walk's turns (WALK_TURN_MS), not to how fast this machine is. The walk costs no
// query, so one dialect (SQLite, a file of this test's own) shows it for all three.
import { describe, expect, it } from 'vitest';
import { WALK_TURN_MS } from '../src/core/slot-walk.js';
import { createGuard } from '../src/index.js';
import { closeWhenTestEnds } from './support/case-cleanup.js';
import { serve } from './support/dashboard.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { seededJob, seedHistory } from './support/history-seed.js';
import { openRaw } from './support/raw-database.js';

/**
 * A timer the work must not hold up: a chain of 1 ms timeouts, and between two of them the longest
 * stretch of this process's CPU time (a timer that came due during a synchronous stretch fires
 * only after it). CPU time, not wall time: on a loaded machine the process also waits for a core,
 * which no code of its own can shorten; a stretch it computes without giving the loop back is
 * its own CPU time.
 */
function ticker(): { stop(): { longestCpuMs: number; ticks: number } } {
  const cpuMs = (): number => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1_000;
  };
  let last = cpuMs();
  let longestCpuMs = 0;
  let ticks = 0;
  let timer: NodeJS.Timeout;
  const tick = (): void => {
    const now = cpuMs();
    longestCpuMs = Math.max(longestCpuMs, now - last);
    last = now;
    ticks += 1;
    timer = setTimeout(tick, 1);
  };
  timer = setTimeout(tick, 1);
  return {
    stop() {
      clearTimeout(timer);
      return { longestCpuMs, ticks };
    },
  };
}

describe('the ledger walk gives the event loop back', () => {
  it("guard.slots() and a job page over a week of an every-3-seconds schedule never hold the process's timers", async () => {
    const target = dialectTargets().find((candidate) => candidate.name === 'sqlite');
    if (target === undefined) throw new Error('no sqlite target');
    const url = databaseUrl(target);
    const prefix = uniquePrefix();
    const guard = createGuard({ database: url, tablePrefix: prefix, telemetry: false });
    closeWhenTestEnds(() => guard.close());
    await guard.migrate();
    const raw = await openRaw('sqlite', url);
    // One job, declared two days ago: a week's range is cut to those two days, 57,600 fires, the
    // newest 10,000 walked. 100 runs: the page draws 100 bars (drawing 1,000 is a stretch of its own).
    await seedHistory(raw, 'sqlite', prefix, { runs: 100, jobs: 1, schedule: () => '*/3 * * * * *' });
    await raw.close();
    const job = seededJob(0);
    const base = await serve(guard.dashboard());

    // Once, before the timer: node-cron's and luxon's first use in a process (their code compiled,
    // the expression parsed) is a synchronous stretch of its own, paid once, not per page. A
    // minute's range walks 20 fires near now: the week's walk below still has 10,000 to compute.
    await guard.slots({ job, since: '1m' });
    // The same for fetch (undici loads on its first call) and the dashboard's first page.
    expect((await fetch(`${base}/locks`)).status).toBe(200);
    const timer = ticker();
    const [ledgers, page] = await Promise.all([
      guard.slots({ job, since: '7d' }),
      fetch(`${base}/job?name=${job}&range=7d`).then((response) => response.text()),
    ]);
    const { longestCpuMs, ticks } = timer.stop();

    expect(ledgers[0]?.slots.length).toBeGreaterThanOrEqual(9_999);
    expect(ledgers[0]?.truncated).toBe(true);
    expect(page).toContain('*/3 * * * * *');
    // The timer ran all along (a walk in one go lets it fire once or twice at most) …
    expect(ticks).toBeGreaterThan(20);
    // … and never waited for more than many turns' worth of this process's work (a turn is
    // WALK_TURN_MS; the page's rendering and the reads' parsing are synchronous stretches too,
    // and a garbage collection, on threads of their own too): well below the walk's 0.5-3 s of CPU in one go.
    expect(longestCpuMs).toBeLessThan(125 * WALK_TURN_MS);
  }, 60_000);
});
