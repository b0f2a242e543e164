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

/** A catalog whose unique index two concurrent CREATEs of one name both write. */
const CATALOG_INDEX = /^pg_(type|class|namespace)_/;

/**
 * An error that only means another `migrate()` did the same work at the same moment: duplicate_table
 * (42P07), duplicate_column (42701), duplicate_object (42710: `type "<table>" already exists`, a
 * CREATE TABLE IF NOT EXISTS that met the other's committed row type), a unique violation (23505)
 * on a system catalog (the same, not yet committed), or a deadlock (40P01).
 * Retried, the migration finds the work done.
 */
export function isPostgresMigrationRace(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, constraint } = error as { code?: unknown; constraint?: unknown };
  if (code === '42P07' || code === '42701' || code === '42710' || code === '40P01') return true;
  return code === '23505' && typeof constraint === 'string' && CATALOG_INDEX.test(constraint);
}
