// Scheduled fires after a quiet spell find their connections already open. Observed on PostgreSQL,
// whose pool says how many connections it holds; the warm-up itself is the same on every dialect.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { recordingLogger } from './support/guards.js';

const postgres = dialectTargets().filter((target) => target.name === 'postgres');

describe.each(postgres)('connection warm-up on $name', (target) => {
  it('opens a connection per run due a second before a quiet fire, up to the three statements a tick sends at once', async () => {
    // Idle connections close after 1.5 s: the schedule declarations (slot ledger) made when the
    // tasks are scheduled have closed theirs before the warm-up, whose connections stay open until
    // the fire. What stays open (the trigger LISTEN connection) is the baseline.
    const pool = new pg.Pool({ connectionString: databaseUrl(target), max: 8, idleTimeoutMillis: 1_500 });
    const logger = recordingLogger();
    const guard = createGuard({ database: pool, tablePrefix: uniquePrefix(), logger });
    try {
      await guard.migrate();
      // A fire at a whole second at least 4 s away (a seconds field: it fires once a minute).
      const fireAt = Math.ceil((Date.now() + 4_000) / 1_000) * 1_000;
      const expression = `${new Date(fireAt).getUTCSeconds()} * * * * *`;
      const started: number[] = [];
      for (let job = 0; job < 6; job += 1) {
        guard.schedule(expression, { name: `warm-${job}`, lockAtMostFor: '10s' }, () => void started.push(Date.now()));
      }
      await sleep(Math.max(0, fireAt - 1_300 - Date.now()));
      const baseline = pool.totalCount;
      let most = baseline;
      while (Date.now() < fireAt - 20) {
        most = Math.max(most, pool.totalCount);
        await sleep(10);
      }
      // Before the fire, three connections wait for the six runs (the runs themselves would open
      // theirs only at the fire): the first acquire goes alone, the other five together.
      expect(most - baseline).toBe(3);
      await expect.poll(() => started.length, { timeout: 5_000 }).toBe(6);
      expect(Math.min(...started)).toBeGreaterThanOrEqual(fireAt);
      expect(logger.errors).toEqual([]);
    } finally {
      await guard.shutdown();
      await pool.end();
    }
  });

  it('opens none for a destroyed task, and plans again for a task started again', async () => {
    // Idle connections close at once, so that the schedule declarations (slot ledger) made when the
    // tasks are scheduled do not count; what stays open (the trigger LISTEN connection) is the baseline.
    const pool = new pg.Pool({ connectionString: databaseUrl(target), max: 8, idleTimeoutMillis: 100 });
    const guard = createGuard({ database: pool, tablePrefix: uniquePrefix(), logger: recordingLogger() });
    try {
      await guard.migrate();
      const fireAt = Math.ceil((Date.now() + 4_000) / 1_000) * 1_000;
      const expression = `${new Date(fireAt).getUTCSeconds()} * * * * *`;
      const started: string[] = [];
      const tasks = ['kept', 'destroyed-1', 'destroyed-2', 'restarted'].map((name) =>
        guard.schedule(expression, { name, lockAtMostFor: '10s' }, () => void started.push(name)),
      );
      // node-cron still reports a next run for a destroyed task (and after maxExecutions).
      await tasks[1]?.destroy();
      await tasks[2]?.destroy();
      await tasks[3]?.stop();
      await sleep(50);
      await tasks[3]?.start();
      await sleep(1_000);
      const baseline = pool.totalCount;
      let most = pool.totalCount;
      while (Date.now() < fireAt - 20) {
        most = Math.max(most, pool.totalCount);
        await sleep(20);
      }
      expect(most - baseline).toBe(2);
      await expect.poll(() => started.sort(), { timeout: 5_000 }).toEqual(['kept', 'restarted']);
    } finally {
      await guard.shutdown();
      await pool.end();
    }
  });
});
