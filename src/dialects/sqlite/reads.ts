import type { ReadSql } from '../../core/dialect.js';

/** Times are ISO text in UTC already; parameters use the same fixed-width form. */
export const sqliteReads: ReadSql = {
  now: `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
  time: (column) => column,
  name: (column) => column,
  millisecondsUntil: (column) => `CAST(round((julianday(${column}) - julianday('now')) * 86400000) AS INTEGER)`,
  timeParameter: (date) => date.toISOString(),
};
