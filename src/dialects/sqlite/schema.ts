import type { ColumnTypes } from '../../core/dialect.js';

/**
 * Times are TEXT in UTC, 'YYYY-MM-DDTHH:MM:SS.SSSZ': readable in plain SQL, and in a fixed width so
 * that comparing the text compares the times. TEXT compares byte-wise (BINARY collation).
 */
export const sqliteColumnTypes: ColumnTypes = {
  jobName: 'text',
  timestamp: 'text',
  lockedBy: 'text',
  token: 'text',
  status: 'text',
  bigint: 'integer',
  boolean: 'integer',
  text: 'text',
};

/** A text primary key needs no second b-tree. */
export const sqliteCreateTableSuffix = 'WITHOUT ROWID';
