import { createGuard, type Guard, type GuardOptions, type Logger } from '../../src/index.js';
import { closeWhenTestEnds } from './case-cleanup.js';
import { databaseUrl, uniquePrefix, type DialectTarget } from './dialects.js';

/** A logger that keeps what it was told, for assertions. */
export interface RecordingLogger extends Logger {
  readonly warnings: string[];
  readonly errors: string[];
}

export function recordingLogger(): RecordingLogger {
  const warnings: string[] = [];
  const errors: string[] = [];
  return { warnings, errors, warn: (m) => void warnings.push(m), error: (m) => void errors.push(m) };
}

export interface TestGuard {
  readonly guard: Guard;
  readonly url: string;
  readonly prefix: string;
  readonly logger: RecordingLogger;
}

/** A migrated guard on its own tables, closed when the test ends (`closeWhenTestEnds`). */
export async function migratedGuard(target: DialectTarget, options: Partial<GuardOptions> = {}): Promise<TestGuard> {
  const url = databaseUrl(target);
  const prefix = uniquePrefix();
  const tested = guardOn(url, prefix, options);
  await tested.guard.migrate();
  return tested;
}

/** Another guard on the same tables, as a second replica would have; closed when the test ends. */
export function guardOn(url: string, prefix: string, options: Partial<GuardOptions> = {}): TestGuard {
  const logger = recordingLogger();
  const guard = createGuard({ database: url, tablePrefix: prefix, logger, ...options });
  closeWhenTestEnds(() => guard.close());
  return { guard, url, prefix, logger };
}

/** A guard on the tables for the length of `use`, closed when it settles. */
export async function withGuardOn<T>(url: string, prefix: string, use: (guard: Guard) => Promise<T>): Promise<T> {
  const guard = createGuard({ database: url, tablePrefix: prefix, logger: recordingLogger() });
  try {
    return await use(guard);
  } finally {
    await guard.close();
  }
}
