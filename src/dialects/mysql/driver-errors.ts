// Recognising MySQL/MariaDB driver errors (mysql2) by their errno.

/** ER_LOCK_WAIT_TIMEOUT */
export function isMysqlLockWaitTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { errno?: unknown }).errno === 1205;
}

/**
 * ER_OPTION_PREVENTS_STATEMENT (1290) for the read-only options ("running with the --read-only
 * option", also --super-read-only on MySQL; 1290 names other options too, so the message says
 * which), and ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION (1792): a session whose transactions are
 * read-only (`transaction_read_only`, MariaDB 10.11's `tx_read_only`).
 */
export function isMysqlReadOnly(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { errno, message } = error as { errno?: unknown; message?: unknown };
  if (errno === 1792) return true;
  return errno === 1290 && typeof message === 'string' && /read[-_]only/i.test(message);
}

/** ER_NO_SUCH_TABLE */
export function isMysqlMissingTable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { errno?: unknown }).errno === 1146;
}

/**
 * ER_TABLE_EXISTS_ERROR (1050), ER_DUP_FIELDNAME (1060), ER_DUP_KEYNAME (1061), ER_DUP_ENTRY (1062,
 * a ledger row another process recorded) and ER_LOCK_DEADLOCK (1213, also Galera's certification
 * failure): an error that only means another `migrate()` did the same work at the same moment.
 * Retried, the migration finds the work done.
 */
export function isMysqlMigrationRace(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { errno } = error as { errno?: unknown };
  return errno === 1050 || errno === 1060 || errno === 1061 || errno === 1062 || errno === 1213;
}

// A take that other sessions keep rolling back is a lost race (Galera's certification conflicts).

/** ER_LOCK_DEADLOCK */
const DEADLOCK = 1213;

/** ER_LOCK_DEADLOCK: InnoDB chose the statement's transaction as a deadlock victim, or (Galera) it failed certification. */
export function isDeadlock(error: unknown): boolean {
  return (error as { errno?: unknown }).errno === DEADLOCK;
}

/**
 * A take's result, or undefined when it still failed with a deadlock error after its attempts
 * (`againIfDeadlocked`): a lost race, never an error. The take was rolled back (it took nothing),
 * and only other sessions writing the same lock row at that instant make it a victim again and
 * again: on Galera every node takes a free row locally, the cluster's certification lets the
 * first COMMIT through and fails the others' (error 1213), and a loser's next attempt fails again
 * while its node has not yet applied the winner's write. The caller answers it like a take that
 * matched nothing: the row is someone else's.
 */
export async function unlessConflicted<Result>(taking: Promise<Result>): Promise<Result | undefined> {
  try {
    return await taking;
  } catch (error) {
    if (isDeadlock(error)) return undefined;
    throw error;
  }
}
