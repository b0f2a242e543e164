// The migration lease (src/admin/migration-lease.ts): one migrate() at a time, by a row any server
// session (and any Galera node) sees; a dead holder's lease lapses. Concurrent migrate() calls in
// separate processes: concurrency.test.ts and test/topologies/pgbouncer.test.ts.
import { describe, it } from 'vitest';
import type { DialectName } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { openRaw } from './support/raw-database.js';

/** A time on the database's clock `seconds` from now, in the column's own representation. */
function fromNow(dialect: DialectName, seconds: number): string {
  if (dialect === 'postgres') return `now() + interval '${seconds} seconds'`;
  if (dialect === 'mysql') return `UTC_TIMESTAMP(3) + INTERVAL ${seconds} SECOND`;
  return `strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '${seconds} seconds')`;
}

describe.each(dialectTargets())('migration lease on $name', (target) => {
  it('makes migrate() wait while another holds the lease, and given back it runs and gives it back', async ({ expect }) => {
    const url = databaseUrl(target);
    const { guard, prefix } = guardOn(url, uniquePrefix());
    await guard.migrate();
    const raw = await openRaw(target.name, url);
    try {
      const lease = `${prefix}migration_lease`;
      expect(await raw.query(`SELECT holder FROM ${lease}`)).toEqual([{ holder: null }]);
      await raw.query(`UPDATE ${lease} SET holder = 'another-migrate', expires_at = ${fromNow(target.name, 3600)}`);
      let settled = false;
      const second = guardOn(url, prefix)
        .guard.migrate()
        .finally(() => (settled = true));
      // Still waiting well after a migrate() of migrated tables takes (a few statements).
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(settled).toBe(false);
      await raw.query(`UPDATE ${lease} SET holder = NULL WHERE holder = 'another-migrate'`);
      await expect(second).resolves.toMatchObject({ database: expect.any(Number) as number });
      expect(await raw.query(`SELECT holder FROM ${lease}`)).toEqual([{ holder: null }]);
    } finally {
      await raw.close();
    }
  });

  it('takes over a lease whose holder died: it lapsed at its expiry', async ({ expect }) => {
    const url = databaseUrl(target);
    const { guard, prefix } = guardOn(url, uniquePrefix());
    await guard.migrate();
    const raw = await openRaw(target.name, url);
    try {
      const lease = `${prefix}migration_lease`;
      await raw.query(`UPDATE ${lease} SET holder = 'dead-migrate', expires_at = ${fromNow(target.name, -1)}`);
      await expect(guardOn(url, prefix).guard.migrate()).resolves.toMatchObject({ database: expect.any(Number) as number });
      expect(await raw.query(`SELECT holder FROM ${lease}`)).toEqual([{ holder: null }]);
    } finally {
      await raw.close();
    }
  });
});
