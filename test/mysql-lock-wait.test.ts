// A take blocked behind another connection's row lock must end on the server soon after the
// guard gave up on it (acquireTimeout, rounded up to whole seconds), never commit minutes later.
import { describe, expect, it } from 'vitest';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';

const mysqlTarget = dialectTargets().find((target) => target.name === 'mysql');

describe.skipIf(mysqlTarget?.serverUrl === null || mysqlTarget === undefined)('MySQL: lock statements bounded on the server', () => {
  it('a take waiting for a row lock held elsewhere gives up on the server within acquireTimeout rounded up, and never commits later', async () => {
    if (mysqlTarget === undefined) return;
    const { guard, url, prefix } = await migratedGuard(mysqlTarget, { acquireTimeout: '1s' });
    expect(await guard.run({ name: 'blocked', lockAtMostFor: '1m' }, () => 0)).toEqual({ executed: true, value: 0 });
    const holder = await openRaw('mysql', url);
    const watcher = await openRaw('mysql', url);
    try {
      const snapshot = `SELECT lock_until, locked_at, locked_by, token FROM \`${prefix}locks\` WHERE name = 'blocked'`;
      const before = await watcher.query(snapshot);
      await holder.query('BEGIN');
      await holder.query(`SELECT * FROM \`${prefix}locks\` WHERE name = 'blocked' FOR UPDATE`);
      const skipped = await guard.run({ name: 'blocked', lockAtMostFor: '1m' }, () => 1);
      expect(skipped).toMatchObject({ executed: false, reason: 'error' });
      // The server ends the waiting take by itself (innodb_lock_wait_timeout = 1 s), not after 50 s.
      const waiting = `SELECT COUNT(*) AS n FROM information_schema.processlist WHERE info LIKE 'UPDATE \`${prefix}locks\`%'`;
      await expect
        .poll(async () => Number((await watcher.query<{ n: number }>(waiting))[0]?.n), {
          timeout: 15_000,
          interval: 200,
        })
        .toBe(0);
      await holder.query('COMMIT');
      // Nothing took the row once it was free: the take gave up, it did not wait for the commit.
      expect(await watcher.query(snapshot)).toEqual(before);
      // The guard sends the next take once the first one's answer (the server's lock wait timeout)
      // has reached it; on a loaded machine that can come after the processlist is empty, and until
      // then a run is skipped as "still not answered" (nothing sent). Any other result is the answer.
      const until = performance.now() + 15_000;
      let result = await guard.run({ name: 'blocked', lockAtMostFor: '1m' }, () => 2);
      while (
        !result.executed &&
        result.reason === 'error' &&
        /still not answered/.test(result.error.message) &&
        performance.now() < until
      ) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        result = await guard.run({ name: 'blocked', lockAtMostFor: '1m' }, () => 2);
      }
      expect(result).toEqual({ executed: true, value: 2 });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.close();
      await watcher.close();
    }
  }, 60_000);
});
