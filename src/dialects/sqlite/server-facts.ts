import { CompiledQuery, type Kysely } from 'kysely';
import type { ServerFacts } from '../../core/dialect.js';
import type { LazySqliteDatabase } from './statements.js';

// The library's version and the journal mode: WAL lets the replicas of one host read while one writes.
const SERVER_SQL = 'SELECT sqlite_version() AS version';

/** SQLite is a file on one host: no pooler, no cluster; read-only only when the file was opened so. */
export async function inspectSqliteServer(db: Kysely<unknown>, native: LazySqliteDatabase | undefined): Promise<ServerFacts> {
  const [row] = (await db.executeQuery<{ version: string }>(CompiledQuery.raw(SERVER_SQL))).rows;
  const [journal] = (await db.executeQuery<{ journal_mode: string }>(CompiledQuery.raw('PRAGMA journal_mode'))).rows;
  const database = native?.get();
  return {
    version: `SQLite ${row?.version ?? '?'}`,
    settings: { journal_mode: journal?.journal_mode ?? 'unknown' },
    readOnly: database?.readonly === true ? 'the SQLite file was opened read-only' : undefined,
    insideTransaction: database === undefined ? undefined : database.inTransaction,
    transactionPooling: undefined,
    cluster: undefined,
  };
}
