import { Kysely, PostgresDialect, PostgresIntrospector } from 'kysely';
import type pg from 'pg';
import type { DialectHandles } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely-dialect.js';
import { isPostgresPool } from './database-input.js';

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
