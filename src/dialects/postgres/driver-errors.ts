// Recognising PostgreSQL driver errors (node-postgres) by their SQLSTATE code.

/** lock_not_available: lock_timeout passed (a user may set one on the pool's sessions). */
export function isPostgresLockWaitTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '55P03';
}

/**
 * read_only_sql_transaction: a write (or LISTEN) on a standby in recovery ("cannot execute INSERT
 * in a read-only transaction", "cannot execute LISTEN during recovery"), or in a session whose
 * transactions are read-only (default_transaction_read_only for the server, database or role).
 */
export function isPostgresReadOnly(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '25006';
}

/** undefined_table */
export function isPostgresMissingTable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '42P01';
}

/**
 * serialization_failure: under repeatable read or serializable (a server or role default), a
 * statement that met a row another transaction changed since its snapshot, or a serializable
 * conflict. The statement rolled back.
 */
export function isPostgresSerializationFailure(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40001';
}
