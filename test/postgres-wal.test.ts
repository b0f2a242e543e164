// PostgreSQL only: a losing acquire must write nothing (no WAL), because N−1 replicas lose every tick.
import { describe, expect, it } from 'vitest';
import { createGuard } from '../src/index.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { countingPostgresPool } from './support/postgres-statements.js';
import { openRaw, type RawDatabase } from './support/raw-database.js';

const postgres = dialectTargets().find((target) => target.name === 'postgres');
if (postgres === undefined) throw new Error('no postgres target');

const ATTEMPTS = 100;
/** Jobs whose acquires start in the same tick, and ticks measured, in the batch test. */
const BATCH = 20;
const ROUNDS = 5;

interface WalWindow {
  bytes: number;
  /** The WAL records written in the window (pg_walinspect), to say what moved when something did. */
  records: string[];
}

async function walDuring(raw: RawDatabase, action: () => Promise<void>): Promise<WalWindow> {
  // The insert position, not pg_current_wal_lsn() (the write position): a record inserted before
  // the window but written out during it must not count, and one inserted during it must.
  const [before] = await raw.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
  await action();
  const [after] = await raw.query<{ lsn: string; bytes: string }>(
    'SELECT pg_current_wal_insert_lsn()::text AS lsn, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), ?::pg_lsn)::text AS bytes',
    [before?.lsn],
  );
  const bytes = Number(after?.bytes);
  if (bytes === 0) return { bytes, records: [] };
  // pg_walinspect reads only flushed WAL; a checkpoint flushes it.
  await raw.query('CHECKPOINT');
  const records = await raw.query<{ record: string }>(
    `SELECT resource_manager || '/' || record_type || ' ' || coalesce(block_ref, '') AS record
       FROM pg_get_wal_records_info(?::pg_lsn, ?::pg_lsn)`,
    [before?.lsn, after?.lsn],
  );
  return { bytes, records: records.map((row) => row.record) };
}

describe('losing on postgres', () => {
  it(`writes no WAL across ${ATTEMPTS} losing attempts, where ShedLock's upsert does`, async () => {
    const { guard: holder, url, prefix } = await migratedGuard(postgres);
    const contender = guardOn(url, prefix).guard;
    const raw = await openRaw('postgres', url);
    let release!: () => void;
    const holding = holder.run({ name: 'wal', lockAtMostFor: '1m' }, () => new Promise<void>((r) => (release = r)));
    try {
      await expect.poll(() => release).toBeTypeOf('function');
      // After a checkpoint, the first hint-bit change to a page logs a full-page image (data
      // checksums are on). Set those bits now, so that the measurement sees only the statements.
      await raw.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
      await raw.query('CHECKPOINT');
      for (let i = 0; i < 5; i += 1) await contender.run({ name: 'wal', lockAtMostFor: '1m' }, () => 'never');

      const ours = await walDuring(raw, async () => {
        for (let i = 0; i < ATTEMPTS; i += 1) {
          const result = await contender.run({ name: 'wal', lockAtMostFor: '1m' }, () => 'never');
          expect(result).toEqual({ executed: false, reason: 'locked' });
        }
      });

      // The reference form locks the conflicting row even when its WHERE is false: the same
      // measurement must see it write, or it could not have seen ours write either.
      const upsert = `INSERT INTO ${prefix}locks (name, lock_until, locked_at, locked_by, token)
        VALUES ('wal', now() + interval '1 minute', now(), 'reference', 'reference')
        ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at,
          locked_by = EXCLUDED.locked_by, token = EXCLUDED.token
        WHERE ${prefix}locks.lock_until <= now() RETURNING 1`;
      const reference = await walDuring(raw, async () => {
        for (let i = 0; i < ATTEMPTS; i += 1) expect(await raw.query(upsert)).toEqual([]);
      });

      expect(ours).toEqual({ bytes: 0, records: [] });
      expect(reference.bytes).toBeGreaterThan(ATTEMPTS * 50);
      expect(reference.records.some((record) => record.startsWith('Heap/LOCK'))).toBe(true);
    } finally {
      release();
      await holding;
      await raw.close();
    }
  });

  it(`writes no WAL across ${ATTEMPTS} attempts of a paused job (issue 17)`, async () => {
    const { guard: operator, url, prefix } = await migratedGuard(postgres);
    const contender = guardOn(url, prefix).guard;
    const raw = await openRaw('postgres', url);
    try {
      expect((await contender.run({ name: 'off', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
      await operator.pause('off', { reason: 'maintenance' });
      await raw.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
      await raw.query('CHECKPOINT');
      // Set the pages' hint bits first (see above); the first attempt after a release of its own skips the probe.
      for (let i = 0; i < 5; i += 1) await contender.run({ name: 'off', lockAtMostFor: '1m' }, () => 'never');
      const paused = await walDuring(raw, async () => {
        for (let i = 0; i < ATTEMPTS; i += 1) {
          expect(await contender.run({ name: 'off', lockAtMostFor: '1m' }, () => 'never')).toEqual({
            executed: false,
            reason: 'paused',
          });
        }
      });
      expect(paused).toEqual({ bytes: 0, records: [] });
    } finally {
      await raw.close();
    }
  });

  it(`writes no WAL when the acquires of one tick lose together, in two statements a tick for ${BATCH} jobs (issue 19)`, async () => {
    const { guard: holder, url, prefix } = await migratedGuard(postgres);
    const names = Array.from({ length: BATCH }, (_, index) => `batch-${index}`);
    // The guard's statements, counted on a pool of its own.
    const counted = countingPostgresPool(url);
    const { pool } = counted;
    const contender = createGuard({ database: pool, tablePrefix: prefix, logger: { warn: () => undefined, error: () => undefined } });
    const raw = await openRaw('postgres', url);
    const tick = () => Promise.all(names.map((name) => contender.run({ name, lockAtMostFor: '1m' }, () => 'ran')));
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding: Promise<unknown> | undefined;
    try {
      // The contender wins every job and releases it: its next attempt at each skips the probe,
      // so that the first tick measured is a batch of takes that lose, the next ones probes.
      expect((await tick()).map((result) => result.executed)).toEqual(names.map(() => true));
      let taken = 0;
      holding = Promise.all(names.map((name) => holder.run({ name, lockAtMostFor: '1m' }, () => ((taken += 1), held))));
      await expect.poll(() => taken).toBe(BATCH);
      // Hint bits and pruning of the rows the holder just wrote, and the guards' presence rows:
      // done before the window (see above), then the WAL must stand still.
      // The catalogs too: creating pg_walinspect rewrites some pg_proc rows (its REVOKEs), and the
      // first backend to plan a new statement afterwards would prune that page, in the window.
      await raw.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
      const catalogs = ['pg_proc', 'pg_class', 'pg_type', 'pg_attribute', 'pg_operator', 'pg_namespace'];
      for (const catalog of catalogs) await raw.query(`SELECT count(*) FROM pg_catalog.${catalog}`);
      await raw.query('CHECKPOINT');
      for (const catalog of catalogs) await raw.query(`SELECT count(*) FROM pg_catalog.${catalog}`);
      await raw.query(`SELECT count(*) FROM ${prefix}locks`);
      await raw.query(`SELECT count(*) FROM ${prefix}runs`);
      // Through the name index too (marking the index entries of the rows' old versions dead is
      // a hint as well), as the statements may read the rows either way.
      await raw.query('SET enable_seqscan = off');
      await raw.query(`SELECT * FROM ${prefix}locks WHERE name = ANY(?)`, [names]);
      await raw.query('SET enable_seqscan = on');
      await expect
        .poll(
          async () => {
            const window = await walDuring(raw, () => new Promise<void>((resolve) => setTimeout(resolve, 300)));
            return window.bytes;
          },
          { timeout: 15_000, interval: 100 },
        )
        .toBe(0);

      const before = counted.count();
      const ours = await walDuring(raw, async () => {
        for (let round = 0; round < ROUNDS; round += 1) {
          expect(await tick()).toEqual(names.map(() => ({ executed: false, reason: 'locked' })));
        }
      });
      expect(ours).toEqual({ bytes: 0, records: [] });
      // Two statements per tick, not one per job: the first job's at once, then one for the other
      // jobs of the turn (the take of all at the first tick, then the probe of all).
      expect(counted.count() - before).toBe(2 * ROUNDS);
    } finally {
      release();
      await holding;
      await contender.close();
      await pool.end();
      await raw.close();
    }
  });
});
