// Scenario 9, bad server settings: the server-wide settings a guard meets in the wild and must not
// depend on. MariaDB with NO_BACKSLASH_ESCAPES and ANSI_QUOTES in sql_mode (a job name must stay a
// value) and SERIALIZABLE or REPEATABLE READ set globally, on a MariaDB this file starts; PostgreSQL
// with default_transaction_isolation 'repeatable read' on a database this file creates. Contended
// runs from several OS processes with hostile names, while another job holds its lock.
import { afterAll, describe, inject, it } from 'vitest';
import { createGuard, type DialectName, type Guard } from '../../src/index.js';
import { findMariadbd, startMariadb, type RunningDatabase } from '../setup/databases.js';
import { uniquePrefix } from '../support/dialects.js';
import { openRaw, type RawDatabase } from '../support/raw-database.js';
import { HOSTILE_NAMES, slotRace } from '../support/slot-race.js';
import { scenario } from './support/scenario.js';

const PROCESSES = 4;
const ROUNDS = 6;
const JOBS = [...HOSTILE_NAMES, ...Array.from({ length: 8 }, (_, index) => `job-${index}`)];
/** The other job, whose lock is held throughout: its row must never change. */
const FOREIGN = ['x', 'victim'];

interface Setting {
  readonly label: string;
  readonly dialect: DialectName;
  /** A database URL with the setting in force for every new connection; `undo` puts the server back. */
  prepare(): Promise<{ url: string; undo: () => Promise<void> }>;
}

let mariadb: RunningDatabase | undefined;
async function hostileMariadb(isolation: string): Promise<{ url: string; undo: () => Promise<void> }> {
  mariadb ??= await startMariadb({ serverFlags: ['--sql-mode=NO_BACKSLASH_ESCAPES,ANSI_QUOTES,STRICT_TRANS_TABLES'] });
  const { url } = mariadb;
  const raw = await openRaw('mysql', url);
  try {
    await raw.exec(`SET GLOBAL TRANSACTION ISOLATION LEVEL ${isolation}`);
  } finally {
    await raw.close();
  }
  return { url, undo: () => Promise.resolve() };
}
afterAll(async () => {
  await mariadb?.stop();
});

const settings: Setting[] = [
  {
    label: 'mysql (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, SERIALIZABLE)',
    dialect: 'mysql',
    prepare: () => hostileMariadb('SERIALIZABLE'),
  },
  {
    label: 'mysql (NO_BACKSLASH_ESCAPES, ANSI_QUOTES, REPEATABLE READ)',
    dialect: 'mysql',
    prepare: () => hostileMariadb('REPEATABLE READ'),
  },
  {
    label: "postgres (default_transaction_isolation 'repeatable read')",
    dialect: 'postgres',
    async prepare() {
      const serverUrl = inject('postgresUrl');
      if (serverUrl === null) throw new Error('no PostgreSQL server');
      const database = `cronguard_rr_${process.pid}`;
      const raw = await openRaw('postgres', serverUrl);
      try {
        await raw.exec(`CREATE DATABASE ${database}`);
        await raw.exec(`ALTER DATABASE ${database} SET default_transaction_isolation = 'repeatable read'`);
      } finally {
        await raw.close();
      }
      const url = new URL(serverUrl);
      url.pathname = `/${database}`;
      return {
        url: url.toString(),
        async undo() {
          const admin = await openRaw('postgres', serverUrl);
          try {
            await admin.exec(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
          } finally {
            await admin.close();
          }
        },
      };
    },
  },
];

/** Every lock row but the hostile and racing jobs', as the server has it. */
async function foreignRows(raw: RawDatabase, dialect: DialectName, prefix: string): Promise<string[]> {
  const hex = dialect === 'postgres' ? "encode(convert_to(name, 'UTF8'), 'hex')" : 'LOWER(HEX(name))';
  const rows = await raw.query(
    `SELECT ${hex} AS n, lock_until, locked_at, locked_by, token, previous_token, last_slot FROM ${prefix}locks`,
  );
  const foreign = new Set(FOREIGN.map((name) => Buffer.from(name, 'utf8').toString('hex')));
  return rows
    .filter((row) => foreign.has(String(row['n'])))
    .map((row) => JSON.stringify(row))
    .sort();
}

function skipReason(setting: Setting): boolean {
  if (setting.dialect === 'mysql') return findMariadbd() === undefined && process.env['CI'] === undefined;
  return inject('postgresUrl') === null;
}

describe.each(settings)('bad server settings: $label', (setting) => {
  it.skipIf(skipReason(setting))(
    `${PROCESSES} processes × ${JOBS.length} jobs (hostile names) × ${ROUNDS} slots, and unlock() of every hostile name`,
    async () => {
      await scenario('bad-server-settings', setting.label, async () => {
        const { url, undo } = await setting.prepare();
        const prefix = uniquePrefix();
        const errors: string[] = [];
        const logger = {
          warn: (message: string) => void errors.push(message),
          error: (message: string) => void errors.push(message),
        };
        let holder: Guard | undefined;
        let release: () => void = () => undefined;
        const raw = await openRaw(setting.dialect, url);
        try {
          holder = createGuard({ database: url, tablePrefix: prefix, logger });
          await holder.migrate();
          const gate = new Promise<void>((resolve) => (release = resolve));
          const guard = holder;
          await Promise.all(
            FOREIGN.map(
              (name) =>
                new Promise<void>(
                  (started) =>
                    void guard.run({ name, lockAtMostFor: '5m' }, async () => {
                      started();
                      await gate;
                    }),
                ),
            ),
          );
          const before = await foreignRows(raw, setting.dialect, prefix);
          const outcome = await slotRace(url, prefix, JOBS, { processes: PROCESSES, rounds: ROUNDS });
          let unlockedForeign = 0;
          for (const name of HOSTILE_NAMES) if (await guard.unlock(name)) unlockedForeign += 1;
          const after = await foreignRows(raw, setting.dialect, prefix);
          const touched = before.filter((row) => !after.includes(row)).length + (before.length === FOREIGN.length ? 0 : 1);
          if (outcome.firstErrors.length > 0 || outcome.logged.length > 0)
            console.error([...outcome.firstErrors, ...outcome.logged.slice(0, 5)].join('\n'));
          return {
            done: `${PROCESSES} processes × ${JOBS.length} jobs × ${ROUNDS} slots, ${HOSTILE_NAMES.length} unlocks`,
            times: outcome.executions,
            lost: {
              duplicates: outcome.duplicates,
              'slots nobody ran': outcome.unrun,
              'foreign rows touched': touched,
              'hostile unlocks that freed a lock': unlockedForeign,
              'error skips': outcome.errorSkips,
              'logged errors': outcome.logged.length + errors.length,
            },
            figures: `${outcome.executions} runs of ${PROCESSES * JOBS.length * ROUNDS} attempts`,
          };
        } finally {
          release();
          await holder?.close();
          await raw.close();
          await undo();
        }
      });
    },
  );
});
