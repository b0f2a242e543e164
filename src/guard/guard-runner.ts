import type { OpenedDatabase } from '../dialects/connect.js';
import { ReplicaPresence } from '../admin/replica-presence.js';
import { hasOperatorControls, readSchemaVersions } from '../admin/schema-version.js';
import { reportToOpenTelemetry } from '../integrations/telemetry/opentelemetry.js';
import { GuardEvents } from '../core/events.js';
import { Runner } from '../core/runner.js';
import type { ResolvedGuardOptions } from './guard-options.js';
import { schemaGatedLockStore, type SchemaGate } from './schema-gated-lock-store.js';

/**
 * A guard's runner: its lock store on the opened database, its events (reported to OpenTelemetry
 * when `telemetry` is on), and what runs after a run that executed (`afterExecuted`: the retention
 * prune). The runner owns the run state. `schemaGate`: what the guard tells its lock store about the
 * tables' schema (schema-gated-lock-store.ts).
 */
export function createGuardRunner(
  resolved: ResolvedGuardOptions,
  opened: OpenedDatabase,
  afterExecuted: () => void,
): { runner: Runner; events: GuardEvents; schemaGate: SchemaGate } {
  const { dialect, tables } = resolved;
  const events = new GuardEvents(resolved.logger);
  // Records this replica's cronguard version beside its lockedBy, rarely, after the locks it takes
  // (a losing acquire still writes nothing).
  const presence = new ReplicaPresence({
    db: opened.db,
    dialect,
    tables,
    lockedBy: resolved.lockedBy,
    logger: resolved.logger,
  });
  events.on('acquired', () => presence.noteActivity());
  const settings = {
    native: resolved.preparedStatements ? opened.native : undefined,
    history: resolved.history,
    acquireTimeoutMs: resolved.acquireTimeoutMs,
  };
  // The pause is read only once the tables have its columns (migration 004): on tables nobody
  // migrated yet, the jobs still run, with the statements of before.
  const { store, gate } = schemaGatedLockStore(
    dialect.createLockStore(opened.db, tables, settings),
    dialect.createLockStore(opened.db, tables, { ...settings, operatorControls: false }),
    async () => hasOperatorControls(await readSchemaVersions(opened.db, dialect, tables)),
  );
  const runner = new Runner({
    store,
    dialect,
    lockedBy: resolved.lockedBy,
    logger: resolved.logger,
    events,
    defaults: resolved.defaults,
    recordSkips: resolved.recordSkips,
    statementTimeoutMs: resolved.acquireTimeoutMs,
    runContext: resolved.telemetry ? reportToOpenTelemetry(events) : undefined,
    afterExecuted,
  });
  return { runner, events, schemaGate: gate };
}
