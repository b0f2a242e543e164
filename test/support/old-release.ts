import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './run-process.js';

/**
 * cronguard 0.1.0 as npm published it, for the upgrade tests: `npm pack` of the tag v0.1.0,
 * committed (test/fixtures/releases/README.md says how it was made), so that a clean clone without
 * tags, as CI makes, has it.
 */
const TARBALL = fileURLToPath(new URL('../fixtures/releases/cronguard-0.1.0.tgz', import.meta.url));

/** The old API, as far as the tests use it (its real types are not installed). */
export interface OldGuard {
  migrate(): Promise<void>;
  run(
    options: { name: string; lockAtMostFor: string; lockAtLeastFor?: string | number },
    fn: () => unknown,
  ): Promise<{ executed: boolean }>;
  history(query?: { job?: string; limit?: number }): Promise<{ runs: Record<string, unknown>[] }>;
  locks(): Promise<Record<string, unknown>[]>;
  doctor(): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}
export interface OldRelease {
  /** The unpacked package's folder. */
  readonly folder: string;
  /** Its entry point, dist/src/index.js. */
  readonly entry: string;
  /** Its CLI. */
  readonly bin: string;
  /** `database`: a URL, or a handle 0.1.0 adopts (Kysely, a pg or mysql2 pool, a better-sqlite3 Database). */
  createGuard(options: { database: unknown; tablePrefix: string; lockedBy?: string; logger?: unknown }): OldGuard;
}

let unpacked: string | undefined;

/**
 * Unpacks the tarball into a temporary folder, once per test process, beside a `node_modules` link
 * to the repository's: the old package resolves its dependencies (kysely, pg, mysql2, better-sqlite3,
 * luxon, node-cron) from there, as an app's install would give them.
 */
export function unpackOldRelease(): { folder: string; entry: string; bin: string } {
  if (unpacked === undefined) {
    const root = mkdtempSync(join(tmpdir(), 'cronguard-0.1.0-'));
    execFileSync('tar', ['-xzf', TARBALL, '-C', root]);
    // Its source maps point at src/*.ts, which the package does not ship (vite would warn of each
    // file): the maps and the comments naming them go.
    execFileSync('find', [join(root, 'package'), '-name', '*.js.map', '-delete']);
    execFileSync('find', [join(root, 'package'), '-name', '*.js', '-exec', 'sed', '-i', '/^\\/\\/# sourceMappingURL=/d', '{}', '+']);
    symlinkSync(join(repoRoot, 'node_modules'), join(root, 'node_modules'), 'dir');
    unpacked = join(root, 'package');
  }
  const entry = join(unpacked, 'dist/src/index.js');
  if (!existsSync(entry)) throw new Error(`${TARBALL} did not unpack to ${entry}`);
  return { folder: unpacked, entry, bin: join(unpacked, 'dist/src/cli/main.js') };
}

/** cronguard 0.1.0, imported into the test's process. */
export async function importOldRelease(): Promise<OldRelease> {
  const paths = unpackOldRelease();
  const module = (await import(paths.entry)) as Pick<OldRelease, 'createGuard'>;
  return { ...paths, createGuard: (options) => module.createGuard(options) };
}
