import type { Kysely } from 'kysely';
import type { Dialect, TableNames } from '../core/dialect.js';
import { GuardError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { packageVersionOrUnknown } from '../core/package-version.js';
import { createReplicaTable, REPLICA_FORGOTTEN_AFTER_MS, type ReplicaTable } from './replicas.js';
import { readSchemaVersions } from './schema-version.js';

/** How often a running guard rewrites its replica row (and checks the schema version again). */
export const REPLICA_REFRESH_MS = 3_600_000;
/** After a failed write (database down, permissions), when to try again. */
const RETRY_AFTER_FAILURE_MS = 60_000;

export interface ReplicaPresenceParts {
  readonly db: Kysely<unknown>;
  readonly dialect: Dialect;
  readonly tables: TableNames;
  readonly lockedBy: string;
  readonly logger: Logger;
}

/**
 * Records which cronguard version this guard runs, in `<prefix>replicas` under its `lockedBy`, so
 * that `locks`, `doctor` and `versions` can say which replica runs which version during a rolling
 * deploy: the holder of a lock. `noteActivity()` is called at each lock taken (never at a skip: a
 * losing acquire writes nothing); it writes on its first call and then about once an hour, in the
 * background, beside the job (never delaying it), never adding to a lock statement.
 *
 * On the first call it also reads the schema version: tables older than this code needs (nobody
 * ran `cronguard migrate` yet) are said once, as a warning with the GuardError code
 * `SCHEMA_OUTDATED`; the jobs run on (their tables are 0.1.0's), only the record is left out, and
 * checked again at the next refresh.
 */
export class ReplicaPresence {
  readonly #parts: ReplicaPresenceParts;
  readonly #table: ReplicaTable;
  /** performance.now() before which there is nothing to do. */
  #dueAt = Number.NEGATIVE_INFINITY;
  #writing = false;
  #written = false;
  #toldOutdated = false;

  constructor(parts: ReplicaPresenceParts) {
    this.#parts = parts;
    this.#table = createReplicaTable(parts.db, parts.dialect, parts.tables);
  }

  noteActivity(): void {
    if (this.#writing || performance.now() < this.#dueAt) return;
    this.#writing = true;
    // Once this turn is over: the win that called this has not started its job yet, and the read
    // and the write (synchronous on SQLite) would come before it (see slot-watch.ts `acquired`).
    void new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#write())
      .then((nextInMs) => (this.#dueAt = performance.now() + nextInMs))
      .finally(() => (this.#writing = false));
  }

  /** Returns when to write next. Never rejects: a failure of this bookkeeping is no failure of the guard's. */
  async #write(): Promise<number> {
    const { db, dialect, tables, lockedBy, logger } = this.#parts;
    try {
      const { database, code } = await readSchemaVersions(db, dialect, tables);
      if (database < code) {
        if (!this.#toldOutdated) {
          this.#toldOutdated = true;
          const error = new GuardError(
            'SCHEMA_OUTDATED',
            `The cronguard tables are at schema version ${database}; cronguard ${packageVersionOrUnknown()} needs ${code}. ` +
              'Jobs still run, but this replica does not record its version (`cronguard locks` shows it as "< 0.2.0"): ' +
              'run `cronguard migrate` or `await guard.migrate()`',
          );
          logger.warn(`${error.code}: ${error.message}`);
        }
        return REPLICA_REFRESH_MS;
      }
      await this.#table.write(lockedBy, packageVersionOrUnknown(), !this.#written);
      this.#written = true;
      await this.#table.forget(new Date(Date.now() - REPLICA_FORGOTTEN_AFTER_MS));
      return REPLICA_REFRESH_MS;
    } catch {
      // The acquires report an unreachable database; this only tries again later, quietly.
      return RETRY_AFTER_FAILURE_MS;
    }
  }
}
