import type Database from 'better-sqlite3';
import { Kysely, SqliteDialect, type SqliteDatabase } from 'kysely';
import { loadDriver } from '../common/load-driver.js';
import type { OpenSettings } from '../../core/dialect.js';
import { MAX_TIMER_MS } from '../../core/timeout.js';
import type { LazySqliteDatabase } from './statements.js';

/** The file path in `sqlite:<path>`, `sqlite://<path>` or `sqlite::memory:`. */
export function sqlitePath(url: string): string {
  const rest = url.slice('sqlite:'.length);
  return rest.startsWith('//') ? rest.slice(2) : rest;
}

/**
 * A database the guard owns, from a `sqlite:` URL. Opened at the first statement, like a server
 * pool connects: a guard that is never used creates no file and holds no handle.
 */
export function openSqlite(
  url: string,
  { acquireTimeoutMs }: OpenSettings,
): { db: Kysely<unknown>; native: LazySqliteDatabase; close: () => Promise<void> } {
  // Loaded now, so that a missing driver fails createGuard, not the first run.
  const BetterSqlite3 = loadDriver('better-sqlite3', 'a sqlite: database') as typeof Database;
  const path = sqlitePath(url);
  let database: Database.Database | undefined;
  let closed = false;
  const lazy: LazySqliteDatabase = {
    get() {
      // Not reopened behind a guard that has shut down (a late release after its shutdown timeout).
      if (closed) throw new Error(`The guard's SQLite database ${path} is closed`);
      if (database === undefined) {
        // The busy timeout: a writer in another process makes this one wait, not fail, but no
        // longer than acquireTimeout. better-sqlite3's wait is synchronous, so no timer could cut
        // it: this is the only bound an acquire has on SQLite.
        // better-sqlite3 takes a whole number of ms up to 2^31 - 1.
        database = new BetterSqlite3(path, { timeout: Math.min(Math.ceil(acquireTimeoutMs), MAX_TIMER_MS) });
        // WAL lets readers and the one writer proceed at once across processes; NORMAL sync is
        // durable against a process crash, which is the failure a lock row has to survive.
        database.pragma('journal_mode = WAL');
        database.pragma('synchronous = NORMAL');
        // SQLite's own default page cache (2 MB), not better-sqlite3's 16 MB: the guard touches a
        // few lock rows and appends to the history, and a larger cache only grew the process's
        // memory with the history table (+43 MB over 100,000 runs, the heap flat).
        database.pragma('cache_size = -2000');
      }
      return database;
    },
  };
  // Kysely and the lock statements share the one connection.
  const open = (): Promise<SqliteDatabase> => Promise.resolve(lazy.get() as unknown as SqliteDatabase);
  const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: open }) });
  // Kysely closes the file only if a query went through it: the lock statements open it directly.
  const close = async (): Promise<void> => {
    await db.destroy();
    closed = true;
    if (database?.open === true) database.close();
  };
  return { db, native: lazy, close };
}
