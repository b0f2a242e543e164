import type { ReadSql } from '../../core/dialect.js';

/** timestamptz comes back as a Date from node-postgres whatever the session's zone. */
export const postgresReads: ReadSql = {
  now: 'now()',
  time: (column) => column,
  name: (column) => column,
  millisecondsUntil: (column) => `round(extract(epoch FROM ${column} - now()) * 1000)::float8`,
  timeParameter: (date) => date,
};
