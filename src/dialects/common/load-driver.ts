import { createRequire } from 'node:module';

/**
 * The database drivers: optional peer dependencies, of which an app installs the one for its
 * database. A PostgreSQL app never installs nor loads better-sqlite3 (a native module that may
 * compile from source for minutes) nor mysql2.
 */
export type DriverPackage = 'pg' | 'mysql2' | 'better-sqlite3';

// The drivers are CommonJS, and `createGuard` is synchronous: require, not import().
const requireDriver = createRequire(import.meta.url);

/**
 * Loads a driver when a guard opens its database from a URL, never before (a pool or database
 * passed in needs no driver of ours). A driver that is not installed is a `TypeError` naming the
 * package to install; any other failure (a driver that is there but broken) is rethrown as it is.
 */
export function loadDriver(name: DriverPackage, usedFor: string): unknown {
  try {
    return requireDriver(name);
  } catch (error) {
    if (isNotFound(error, name)) {
      throw new TypeError(`Install \`${name}\` to use ${usedFor}: npm install ${name}`, { cause: error });
    }
    throw error;
  }
}

/** The driver itself is missing, not one of its own dependencies. */
function isNotFound(error: unknown, name: string): boolean {
  return (
    error instanceof Error &&
    (error as { code?: unknown }).code === 'MODULE_NOT_FOUND' &&
    error.message.startsWith(`Cannot find module '${name}'`)
  );
}
