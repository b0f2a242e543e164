import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { DialectName } from '../../src/index.js';

/** One database the shared suite runs against. `url` is null when its server is not available. */
export interface DialectTarget {
  readonly name: DialectName;
  readonly serverUrl: string | null;
}

const sqliteDir = mkdtempSync(join(tmpdir(), 'cronguard-sqlite-'));
let counter = 0;

/** Every dialect. MySQL's server is null when mariadbd is missing outside CI (global setup says so loudly). */
export function dialectTargets(): DialectTarget[] {
  return [
    { name: 'sqlite', serverUrl: 'sqlite:' },
    { name: 'postgres', serverUrl: inject('postgresUrl') },
    { name: 'mysql', serverUrl: inject('mysqlUrl') },
  ];
}

/** A database URL for one test: a fresh SQLite file, or the shared server (isolate with `uniquePrefix`). */
export function databaseUrl(target: DialectTarget): string {
  if (target.serverUrl === null) throw new Error(`no ${target.name} server`);
  if (target.name === 'sqlite') {
    counter += 1;
    return `sqlite:${join(sqliteDir, `test-${process.pid}-${counter}.sqlite`)}`;
  }
  return target.serverUrl;
}

/** A table prefix no other test uses, so that tests sharing a server never see each other's rows. */
export function uniquePrefix(): string {
  counter += 1;
  return `t${process.pid}_${counter}_${Math.random().toString(36).slice(2, 8)}_`;
}
