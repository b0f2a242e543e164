import type * as mysql2 from 'mysql2';
import type { Dialect } from '../../core/dialect.js';
import { openMysql } from './connection.js';
import { mysqlHandles } from './handle.js';
import { mysqlReads } from './reads.js';
import { createMysqlLockStore } from './lock-store.js';
import { isMysqlLockWaitTimeout, isMysqlMissingTable } from './driver-errors.js';
import { createMysqlTakeProcedure } from './take-procedure.js';
import { mysqlFindTables, mysqlIndexExists, mysqlColumnTypes, mysqlCreateTableSuffix } from './schema.js';
import { inspectMysqlServer } from './server-facts.js';

export const mysqlDialect: Dialect<mysql2.Pool> = {
  name: 'mysql',
  quote: '`',
  columnTypes: mysqlColumnTypes,
  supportsSchemas: false,
  indexExists: mysqlIndexExists,
  findTables: mysqlFindTables,
  createTableSuffix: mysqlCreateTableSuffix,
  createRoutines: createMysqlTakeProcedure,
  reads: mysqlReads,
  createLockStore: createMysqlLockStore,
  isMissingTable: isMysqlMissingTable,
  isLockWaitTimeout: isMysqlLockWaitTimeout,
  // Kysely's migrator locks (an advisory lock, GET_LOCK): no race to retry.
  isMigrationRace: () => false,
  inspectServer: (db) => inspectMysqlServer(db),
  handles: mysqlHandles,
  open: openMysql,
};
