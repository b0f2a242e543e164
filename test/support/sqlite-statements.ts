import Database from 'better-sqlite3';

/** The statements one better-sqlite3 `Database` ran, by their SQL text, while recording. */
export interface StatementRecorder {
  /** The texts run since the last call, in order; starts a new recording. */
  take(): string[];
  /** Puts the driver's methods back. */
  stop(): void;
}

/**
 * Records every statement `database` runs (BEGIN and COMMIT included: the guard prepares those
 * too), by wrapping better-sqlite3's Statement methods in this process; statements of other
 * databases pass through unrecorded.
 */
export function recordStatements(database: Database.Database): StatementRecorder {
  const prototype = Object.getPrototypeOf(database.prepare('SELECT 1')) as Record<string, unknown>;
  const originals = new Map<string, unknown>();
  let recorded: string[] = [];
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = prototype[method] as (...args: unknown[]) => unknown;
    originals.set(method, original);
    prototype[method] = function (this: Database.Statement, ...args: unknown[]) {
      if (this.database === database) recorded.push(this.source);
      return original.apply(this, args);
    };
  }
  return {
    take() {
      const taken = recorded;
      recorded = [];
      return taken;
    },
    stop() {
      for (const [method, original] of originals) prototype[method] = original;
    },
  };
}
