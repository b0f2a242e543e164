// A release sent twice for one execution: what the guard's retry does when its first attempt
// committed but the reply was lost (a connection reset). Called on the lock store itself, on every
// dialect, because a lost reply cannot be provoked through the public API.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/dialects/connect.js';
import { resolveGuardOptions } from '../src/guard/guard-options.js';
import { resolveJob } from '../src/core/job-options.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';

describe.each(dialectTargets())('a release sent twice on $name', (target) => {
  it.skipIf(target.serverUrl === null)('leaves the run as the first release finished it, not overran', async () => {
    const { guard, url, prefix } = await migratedGuard(target);
    const options = resolveGuardOptions({ database: url, tablePrefix: prefix });
    const opened = openDatabase(options.database, options.dialect, options);
    try {
      const store = options.dialect.createLockStore(opened.db, options.tables, {
        native: opened.native,
        history: true,
        acquireTimeoutMs: options.acquireTimeoutMs,
      });
      const job = resolveJob({ name: 'twice', lockAtMostFor: '1m' }, options.defaults);
      const token = randomUUID();
      expect(await store.acquire(job, { token, lockedBy: 'test', slot: null, expectFree: false })).toBe('acquired');
      expect(await store.release(job, token, { status: 'succeeded', error: null })).toBe(true);
      const [first] = (await guard.history({ job: 'twice' })).runs;
      expect(first).toMatchObject({ status: 'succeeded', overran: false });
      await sleep(20);
      expect(await store.release(job, token, { status: 'succeeded', error: null })).toBe(false);
      const [second] = (await guard.history({ job: 'twice' })).runs;
      expect(second).toEqual(first);
    } finally {
      await opened.close();
    }
  });
});
