import type pg from 'pg';
import type { Dialect } from '../../core/dialect.js';
import { openPostgres } from './connection.js';
import { postgresHandles } from './handle.js';
import { postgresReads } from './reads.js';
import { createPostgresLockStore } from './lock-store.js';
import { postgresMigrationLease } from './migration-lease.js';
import { isPostgresLockWaitTimeout, isPostgresMigrationRace, isPostgresMissingTable, isPostgresReadOnly } from './driver-errors.js';
import { postgresColumnTypes, postgresCurrentSchema, postgresFindTables, postgresReadOnlyKind } from './schema.js';
import { listenPostgresTriggers, notifyPostgresTrigger } from './trigger-channel.js';
import { inspectPostgresServer } from './server-facts.js';

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
