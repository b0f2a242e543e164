// A database of its own on the shared server, for a test that runs code we cannot change (a published
// older cronguard) whose reads see every schema of its database: another file's DDL running at the same
// time (migrate-foreign-ddl.test.ts renames and drops tables in a loop) must not reach it.
import { databaseUrl, uniquePrefix, type DialectTarget } from './dialects.js';
import { openRaw } from './raw-database.js';

const created = new Map<string, Promise<string>>();

/**
 * The URL of a database created for this test file on `target`'s server (one per file and dialect,
 * created on first use; the throwaway server goes with the run). SQLite: a fresh file, as `databaseUrl`.
 */
export function ownDatabaseUrl(target: DialectTarget): Promise<string> {
  if (target.name === 'sqlite') return Promise.resolve(databaseUrl(target));
  let url = created.get(target.name);
  if (url === undefined) {
    url = createDatabase(target);
    created.set(target.name, url);
  }
  return url;
}

async function createDatabase(target: DialectTarget): Promise<string> {
  const serverUrl = databaseUrl(target);
  // Only letters, digits and underscores: safe as an identifier on both servers without quoting.
  const name = `own_${uniquePrefix().slice(0, -1)}`;
  const raw = await openRaw(target.name, serverUrl);
  try {
    await raw.exec(`CREATE DATABASE ${name}`);
  } finally {
    await raw.close();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
