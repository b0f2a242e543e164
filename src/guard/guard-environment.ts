import type { OpenedDatabase } from '../dialects/connect.js';
import { ReplicaPresence } from '../admin/replica-presence.js';
import { reportToOpenTelemetry } from '../integrations/telemetry/opentelemetry.js';
import type { ExecuteEnvironment } from '../core/environment.js';
import { GuardEvents } from '../core/events.js';
import { AcquireFailureLog } from '../core/failure-log.js';
import type { InFlight } from '../core/in-flight.js';
import { ReleasedLocks } from '../core/released-locks.js';
import type { ResolvedGuardOptions } from './guard-options.js';

/** What a guard's runs share: its lock store on the opened database, its events, and its run state. */
export function createGuardEnvironment(
  resolved: ResolvedGuardOptions,
  opened: OpenedDatabase,
  state: { inFlight: InFlight; isStopping: () => boolean; stopped: AbortSignal },
): ExecuteEnvironment {
  const { dialect, tables } = resolved;
  const events = new GuardEvents(resolved.logger);
  // Records this replica's cronguard version beside its lockedBy, rarely, after the locks it takes
  // (a losing acquire still writes nothing).
  const presence = new ReplicaPresence({ db: opened.db, dialect, tables, lockedBy: resolved.lockedBy, logger: resolved.logger });
  events.on('acquired', () => presence.noteActivity());
  return {
    store: dialect.createLockStore(opened.db, tables, {
      native: resolved.preparedStatements ? opened.native : undefined,
      history: resolved.history,
      acquireTimeoutMs: resolved.acquireTimeoutMs,
    }),
    dialect,
    lockedBy: resolved.lockedBy,
    logger: resolved.logger,
    events,
    recordSkips: resolved.recordSkips,
    running: new Set(),
    pendingAcquires: new Map(),
    failureLog: new AcquireFailureLog(resolved.logger),
    releasedLocks: new ReleasedLocks(),
    statementTimeoutMs: resolved.acquireTimeoutMs,
    inFlight: state.inFlight,
    isStopping: state.isStopping,
    stopped: state.stopped,
    runContext: resolved.telemetry ? reportToOpenTelemetry(events) : undefined,
  };
}
