// Recognising PostgreSQL driver errors (node-postgres) by their SQLSTATE code.

/** lock_not_available: lock_timeout passed (a user may set one on the pool's sessions). */
export function isPostgresLockWaitTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '55P03';
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
