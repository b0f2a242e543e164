// Recognising MySQL/MariaDB driver errors (mysql2) by their errno.

/** ER_LOCK_WAIT_TIMEOUT */
export function isMysqlLockWaitTimeout(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { errno?: unknown }).errno === 1205;
}

/** ER_NO_SUCH_TABLE */
export function isMysqlMissingTable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { errno?: unknown }).errno === 1146;
}
