import type { ReadOnlyKind } from './dialect.js';
import { GuardError } from './errors.js';

/** What a guard given a read-only server should be given instead. */
const GIVE_THE_PRIMARY =
  'give the guard the primary (read-write) server, by an address that follows it at a failover ' +
  '(DNS, a virtual IP, a proxy or PgBouncer), not a standby or a read replica';

const DESCRIBED: Record<ReadOnlyKind | 'unknown', string> = {
  standby: 'a read-only standby (in recovery)',
  server: 'a read-only server (read_only, or read-only transactions for this server, database or user)',
  unknown: 'a read-only standby or a read-only server',
};

/**
 * The `READ_ONLY_DATABASE` error: `what` failed because the server refused a write as read-only.
 * `kind` says which when known (`Dialect.readOnlyKind`), else both are named.
 */
export function readOnlyDatabaseError(what: string, kind: ReadOnlyKind | undefined, cause: unknown, job?: string): GuardError {
  return new GuardError('READ_ONLY_DATABASE', `${what}: this database is ${DESCRIBED[kind ?? 'unknown']}; ${GIVE_THE_PRIMARY}`, {
    cause,
    ...(job === undefined ? {} : { job }),
  });
}
