// Recognising SQLite driver errors (better-sqlite3) by their code or message.

/** SQLITE_BUSY (and its extended codes): the busy timeout passed while another connection wrote. */
export function isSqliteLockWaitTimeout(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/** SQLITE_READONLY (and its extended codes): the file, or the connection, is read-only. */
export function isSqliteReadOnly(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_READONLY');
}

export function isSqliteMissingTable(error: unknown): boolean {
  return error instanceof Error && /no such table/.test(error.message);
}

/**
 * SQLite has no migration lock across processes: a migration racing another one fails with
 * SQLITE_BUSY, a UNIQUE violation when both recorded the same migration, or "already exists" when
 * both created the same table or column.
 */
export function isSqliteMigrationRace(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  if (code.startsWith('SQLITE_BUSY') || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') return true;
  return code === 'SQLITE_ERROR' && /already exists|duplicate column name/.test((error as Error).message);
}
