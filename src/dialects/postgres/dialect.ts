import type pg from 'pg';
import { Kysely, PostgresDialect, PostgresIntrospector, sql } from 'kysely';
import type { DialectHandles, ReadSql, Dialect } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely.js';
import { openPostgres } from './connection.js';
import { createPostgresLockStore } from './lock-store.js';
import { postgresMigrationLease, postgresColumnTypes, postgresCurrentSchema, postgresFindTables, postgresReadOnlyKind } from './schema.js';
import { isPostgresLockWaitTimeout, isPostgresMigrationRace, isPostgresMissingTable, isPostgresReadOnly } from './driver-errors.js';
import { listenPostgresTriggers, notifyPostgresTrigger } from './trigger-channel.js';
import { inspectPostgresServer } from './server-facts.js';
import type { PostgresPoolLike } from '../common/driver-shapes.js';

/** A node-postgres pool, by its shape (the app's pg may be another copy than any the guard could load). */
export function isPostgresPool(value: object): value is PostgresPoolLike {
  return 'totalCount' in value && 'idleCount' in value && typeof (value as { connect?: unknown }).connect === 'function';
}

/** `postgres://` and `postgresql://` URLs, a node-postgres `Pool`, a Kysely instance on PostgreSQL. */
export const postgresHandles: DialectHandles<pg.Pool> = {
  ownsUrl: (url) => /^postgres(ql)?:\/\//i.test(url),
  serverUrl: true,
  nativeOf: (value) => (isPostgresPool(value) ? (value as unknown as pg.Pool) : undefined),
  // Wraps the user's pool; the guard never ends it.
  adopt: (pool) => new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) }),
  ownsKysely: (db) => introspectorIs(db, PostgresIntrospector),
  adoptKysely: (db) => db,
  describeWrongHandle(value) {
    const handle = value as Record<string, unknown>;
    // pg.Client (also a client checked out of a pool): one connection, no pool to take turns on.
    if (!('connectionParameters' in handle) || typeof handle.query !== 'function') return undefined;
    return typeof handle.release === 'function'
      ? 'a pg client checked out of a pool; pass the pg Pool itself'
      : 'a pg Client; pass a pg Pool';
  },
};

/** timestamptz comes back as a Date from node-postgres whatever the session's zone. */
export const postgresReads: ReadSql = {
  now: 'now()',
  time: (column) => column,
  name: (column) => column,
  millisecondsUntil: (column) => `round(extract(epoch FROM ${column} - now()) * 1000)::float8`,
  timeParameter: (date) => date,
  // The cast types the parameter: `unknown * interval` has no operator.
  nowMinus: (milliseconds) => sql`now() - ${milliseconds}::float8 * interval '1 millisecond'`,
};

export const postgresDialect: Dialect<pg.Pool> = {
  name: 'postgres',
  quote: '"',
  columnTypes: postgresColumnTypes,
  supportsSchemas: true,
  currentSchema: postgresCurrentSchema,
  findTables: postgresFindTables,
  createTableSuffix: '',
  reads: postgresReads,
  createLockStore: createPostgresLockStore,
  isMissingTable: isPostgresMissingTable,
  isLockWaitTimeout: isPostgresLockWaitTimeout,
  isMigrationRace: isPostgresMigrationRace,
  migrationLease: postgresMigrationLease,
  inspectServer: inspectPostgresServer,
  isReadOnly: isPostgresReadOnly,
  readOnlyKind: postgresReadOnlyKind,
  handles: postgresHandles,
  open: openPostgres,
  notifyTrigger: notifyPostgresTrigger,
  listenForTriggers: listenPostgresTriggers,
};
