import type { ReadSql } from '../../core/dialect.js';
import { mysqlTime } from './time-values.js';

/**
 * DATETIME has no zone and mysql2 reads it in the connection's `timezone` (local by default on a
 * user's pool), so times are read as ISO text in UTC, and compared against UTC text. Names are
 * bytes (VARBINARY) and read back as utf8mb4 text.
 */
export const mysqlReads: ReadSql = {
  now: 'UTC_TIMESTAMP(3)',
  time: (column) => `DATE_FORMAT(${column}, '%Y-%m-%dT%H:%i:%s.%fZ')`,
  name: (column) => `CONVERT(${column} USING utf8mb4)`,
  millisecondsUntil: (column) => `(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), ${column}) DIV 1000)`,
  timeParameter: mysqlTime,
};
