import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DialectAdapter, Kysely, RawBuilder } from 'kysely';
import type { Dialect, TableNames } from '../core/dialect.js';

/**
 * How long a taken lease lasts unless renewed. A `migrate()` that dies holding it blocks the others
 * this long at most; a live one renews it every third of that.
 */
export const MIGRATION_LEASE_TTL_MS = 60_000;
const RENEW_EVERY_MS = MIGRATION_LEASE_TTL_MS / 3;

/**
 * How long a `migrate()` waits while others hold the lease, in turn: past that, a holder that keeps
 * renewing without finishing (a hung migration) is reported rather than waited for. As Kysely's
 * own lock waited.
 */
const LEASE_WAIT_MS = 60 * 60_000;

/**
 * Runs `work` (the whole of one `migrate()`) while holding the migration lease: one row in
 * `tables.migrationLease`, taken by one statement on the database's clock, holder = a random token,
 * renewed while `work` runs, given back by token after. The others wait with small random sleeps
 * and, once they hold it, find the work done.
 *
 * It replaces Kysely's migration lock (`withoutKyselyMigrationLock`): a session advisory lock on
 * PostgreSQL, which a transaction pooler (PgBouncer) takes on one server session and tries to
 * release on another ("you don't own a lock"), leaving it held for an hour; GET_LOCK on MySQL,
 * which on Galera holds on one node only, so that nodes migrated at once and failed or crashed. A row
 * needs no session and replicates. Whatever still races (the lease table's own creation, a lease
 * that expired under a stalled holder) fails with an error `dialect.isMigrationRace` recognises, and
 * is retried by the caller.
 */
export async function withMigrationLease<T>(db: Kysely<unknown>, dialect: Dialect, tables: TableNames, work: () => Promise<T>): Promise<T> {
  const lease = dialect.migrationLease;
  const waitedSince = performance.now();
  for (const statement of lease.create(tables)) await retryingRaces(db, dialect, statement, waitedSince);
  const token = randomUUID();
  while (!(await taken(db, dialect, lease.take(tables, token, MIGRATION_LEASE_TTL_MS)))) {
    if (performance.now() - waitedSince > LEASE_WAIT_MS) {
      throw new Error(`another migrate() has held the migration lease (${tables.migrationLease}) for over an hour`);
    }
    await sleep(50 + Math.random() * 200);
  }
  // Renewed in the background while the migrations run. A renewal that fails or finds the lease
  // taken (this process stalled past the expiry) does not stop them: the lease only serialises
  // migrate() calls, and a migration that then races another is retried by the caller.
  let renewal: Promise<unknown> = Promise.resolve();
  const renewer = setInterval(() => {
    renewal = renewal.then(() => lease.renew(tables, token, MIGRATION_LEASE_TTL_MS).execute(db)).catch(() => undefined);
  }, RENEW_EVERY_MS);
  renewer.unref();
  try {
    return await work();
  } finally {
    clearInterval(renewer);
    await renewal;
    // Given back by token; if this fails (the database went away), the lease expires by itself
    // and the next migrate() waits that long at most. It must not hide `work`'s own outcome.
    await lease
      .release(tables, token)
      .execute(db)
      .catch(() => undefined);
  }
}

/** Whether the take won: its statement changed the row. A race lost at commit (a deadlock, Galera's certification) is a loss. */
async function taken(db: Kysely<unknown>, dialect: Dialect, take: RawBuilder<unknown>): Promise<boolean> {
  try {
    const { numAffectedRows } = await take.execute(db);
    return numAffectedRows !== undefined && numAffectedRows > 0n;
  } catch (error) {
    if (dialect.isMigrationRace(error) || dialect.isLockWaitTimeout(error)) return false;
    throw error;
  }
}

/** The lease table's creation: replicas create it at once, and the losers of that race try again. */
async function retryingRaces(db: Kysely<unknown>, dialect: Dialect, statement: RawBuilder<unknown>, since: number): Promise<void> {
  for (;;) {
    try {
      await statement.execute(db);
      return;
    } catch (error) {
      const race = dialect.isMigrationRace(error) || dialect.isLockWaitTimeout(error);
      if (!race || performance.now() - since > MIGRATION_LEASE_TTL_MS) throw error;
      await sleep(20 + Math.random() * 80);
    }
  }
}

/**
 * `db` as Kysely's `Migrator` is given it, with the adapter's migration lock (acquire and release)
 * doing nothing: the caller holds the migration lease instead (`withMigrationLease`). The migrator
 * reads `db.getExecutor().adapter` for that lock and for whether DDL is transactional; every other
 * member is `db`'s own (a Proxy for the reason own-tables-introspection.ts gives).
 */
export function withoutKyselyMigrationLock(db: Kysely<unknown>): Kysely<unknown> {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'getExecutor') {
        return () => {
          const executor = target.getExecutor();
          const adapter = leaseHeldAdapter(executor.adapter);
          return new Proxy(executor, {
            get: (inner, key) => (key === 'adapter' ? adapter : bound(inner, key)),
          });
        };
      }
      return bound(target, property);
    },
  });
}

function leaseHeldAdapter(adapter: DialectAdapter): DialectAdapter {
  const nothing = (): Promise<void> => Promise.resolve();
  return new Proxy(adapter, {
    get: (target, key) => (key === 'acquireMigrationLock' || key === 'releaseMigrationLock' ? nothing : bound(target, key)),
  });
}

function bound(target: object, property: string | symbol): unknown {
  const value: unknown = Reflect.get(target, property, target);
  return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
}
