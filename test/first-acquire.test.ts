// A guard's first acquire does not wait for a read of the tables' schema version (which says
// whether the pause columns exist): after the guard's own migrate() it is known, and before a quiet
// schedule's first fire the connection warm-up reads it a second ahead. Before, the first acquire
// of every guard sent that read and waited for it: a round trip before the probe, at the first
// minute boundary of every replica. Watched on PostgreSQL through a Kysely instance's log, which
// sees every statement the guard sends when it is given one; the gate is the same on every dialect.
// history() and locks(), which also ask whether the pause columns exist, likewise learn it from
// the guard's own migrate().
import { setTimeout as sleep } from 'node:timers/promises';
import { Kysely, PostgresDialect, type LogEvent } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { recordingLogger } from './support/guards.js';

const postgres = dialectTargets().filter((target) => target.name === 'postgres');

interface Sent {
  readonly sql: string;
  readonly at: number;
}

function loggedKysely(url: string): { db: Kysely<unknown>; sent: Sent[] } {
  const sent: Sent[] = [];
  // The log runs once a statement has answered: `at` is when it was sent.
  const log = (event: LogEvent): void => void sent.push({ sql: event.query.sql, at: Date.now() - event.queryDurationMillis });
  return { db: new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 6 }) }), log }), sent };
}

/**
 * A guard on its own tables through a logged Kysely instance, migrated by itself, its log emptied:
 * `use` sees what the guard sends after its own migrate(). Shut down, and the instance destroyed, after.
 */
async function afterOwnMigrate(url: string, use: (guard: Guard, prefix: string, sent: Sent[]) => Promise<void>): Promise<void> {
  const { db, sent } = loggedKysely(url);
  const prefix = uniquePrefix();
  const guard = createGuard({ database: db, tablePrefix: prefix, logger: recordingLogger() });
  try {
    await guard.migrate();
    sent.length = 0;
    await use(guard, prefix, sent);
  } finally {
    await guard.shutdown();
    await db.destroy();
  }
}

/** Statements in the order they were sent. */
const inOrder = (sent: readonly Sent[]): Sent[] => [...sent].sort((a, b) => a.at - b.at);

describe.each(postgres)('the first acquire on $name', (target) => {
  it('sends no read of the schema version after the guard migrated the tables itself', async () => {
    await afterOwnMigrate(databaseUrl(target), async (guard, prefix, sent) => {
      expect(await guard.run({ name: 'first', lockAtMostFor: '10s' }, () => 'ran')).toEqual({ executed: true, value: 'ran' });
      const order = inOrder(sent);
      const firstLock = order.findIndex(({ sql }) => sql.includes(`${prefix}locks`));
      const schemaRead = order.findIndex(({ sql }) => sql.includes(`${prefix}schema_migrations`));
      expect(firstLock).toBeGreaterThanOrEqual(0);
      // The replicas table may have the version read later, in the background, once the run is done.
      expect(schemaRead === -1 || schemaRead > firstLock).toBe(true);
    });
  });

  it('sends no read of the schema version with history() and locks() after the guard migrated the tables itself', async () => {
    await afterOwnMigrate(databaseUrl(target), async (guard, prefix, sent) => {
      expect((await guard.history({ job: 'first' })).runs).toEqual([]);
      expect(await guard.locks()).toEqual([]);
      // One read each, of the runs and of the locks; none of the schema version.
      expect(sent.filter(({ sql }) => sql.includes(`${prefix}runs`))).toHaveLength(1);
      expect(sent.filter(({ sql }) => sql.includes(`${prefix}locks`))).toHaveLength(1);
      expect(sent.filter(({ sql }) => sql.includes(`${prefix}schema_migrations`))).toEqual([]);
    });
  });

  it("reads it a second ahead of a quiet schedule's first fire when another process migrated the tables", async () => {
    const prefix = uniquePrefix();
    const migrating = createGuard({ database: databaseUrl(target), tablePrefix: prefix, logger: recordingLogger() });
    await migrating.migrate();
    await migrating.shutdown();
    const { db, sent } = loggedKysely(databaseUrl(target));
    const logger = recordingLogger();
    const guard = createGuard({ database: db, tablePrefix: prefix, logger });
    try {
      // A fire at a whole second at least 4 s away (a seconds field: once a minute).
      const fireAt = Math.ceil((Date.now() + 4_000) / 1_000) * 1_000;
      const started: number[] = [];
      guard.schedule(`${new Date(fireAt).getUTCSeconds()} * * * * *`, { name: 'quiet', lockAtMostFor: '10s' }, () => {
        started.push(Date.now());
      });
      await sleep(Math.max(0, fireAt - Date.now()));
      await expect.poll(() => started.length, { timeout: 5_000 }).toBe(1);
      const order = inOrder(sent);
      const schemaReads = order.filter(({ sql }) => sql.includes(`${prefix}schema_migrations`));
      const firstLock = order.find(({ sql }) => sql.includes(`${prefix}locks`) && sql.includes('lock_until'));
      expect(firstLock?.at).toBeGreaterThanOrEqual(fireAt);
      // Read before the fire, by the warm-up; none between the fire and the first lock statement.
      expect(schemaReads.some(({ at }) => at < fireAt)).toBe(true);
      expect(schemaReads.filter(({ at }) => at >= fireAt && at <= (firstLock?.at ?? 0))).toEqual([]);
      expect(logger.errors).toEqual([]);
    } finally {
      await guard.shutdown();
      await db.destroy();
    }
  });
});
