// One replica of figure 11 (tick-to-start at scale). argv: dialect url setup-json, where setup is a
// TickScaleSetup from tick-scale.ts. The process runs N jobs on one every-second schedule through
// `guard.schedule` and, beside them, N plain node-cron tasks on the same schedule (no lock), and
// counts the statements its database driver is asked to send. It keeps every start in memory and
// hands them to the parent only when told to stop: a message per run (thousands a second at
// N = 500) would load the very event loop whose lag is measured.
import { createRequire } from 'node:module';
import type { DialectName } from '../../src/index.js';
import type { ScaleMessage, ScaleRun, TickScaleSetup } from './tick-scale.js';

const [dialectArg, url, setupArg] = process.argv.slice(2);
if (url === undefined || setupArg === undefined) throw new Error('usage: tick-scale-worker dialect url setup-json');
const dialect = dialectArg as DialectName;
const setup = JSON.parse(setupArg) as TickScaleSetup;

/** Wall-clock milliseconds with sub-millisecond resolution. */
const now = (): number => performance.timeOrigin + performance.now();

function send(message: ScaleMessage, then?: () => void): void {
  if (process.send === undefined) throw new Error('tick-scale-worker must be forked with an IPC channel');
  if (!process.connected) then?.();
  else if (then === undefined) process.send(message);
  else process.send(message, () => then());
}

const runs: ScaleRun[] = [];
const errors: string[] = [];
/** Statements sent, by the wall-clock second they were sent in. */
const statements = new Map<number, number>();
const count = (): void => {
  const second = Math.floor(Date.now() / 1_000);
  statements.set(second, (statements.get(second) ?? 0) + 1);
};

// The statements are counted where the guard hands them to its driver, in this process only (the
// drivers are CommonJS singletons: the guard requires the very modules patched here). Every
// statement counts: the lock statements, the connection warm-up, the schema-version read, the
// replica presence writes, the "run now" poll. A prepared statement's PREPARE is not a separate
// call here (pg and mysql2 send it with the first execution), so each call is one statement.
const requireDriver = createRequire(import.meta.url);
function countStatements(name: DialectName): void {
  const wrap = (prototype: Record<string, unknown>, methods: string[]): void => {
    for (const method of methods) {
      const original = prototype[method];
      if (typeof original !== 'function') throw new Error(`cannot count ${name} statements: no ${method}`);
      prototype[method] = function (this: unknown, ...args: unknown[]) {
        count();
        return (original as (...a: unknown[]) => unknown).apply(this, args);
      };
    }
  };
  if (name === 'postgres') {
    // pool.query, Kysely and the lock statements all end in Client#query.
    const pg = requireDriver('pg') as { Client: { prototype: Record<string, unknown> } };
    wrap(pg.Client.prototype, ['query']);
  } else if (name === 'mysql') {
    // The guard's pool connections send through Connection#query (no parameters) or #execute.
    const mysql = requireDriver('mysql2') as { Connection: { prototype: Record<string, unknown> } };
    wrap(mysql.Connection.prototype, ['query', 'execute']);
  } else {
    // Every statement runs through a prepared Statement (BEGIN and COMMIT included); exec for pragmas.
    const Database = requireDriver('better-sqlite3') as new (file: string) => {
      prepare(sql: string): object;
      close(): void;
    };
    const probe = new Database(':memory:');
    const statementPrototype = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
    probe.close();
    wrap(statementPrototype, ['run', 'get', 'all', 'iterate']);
    wrap((Database as unknown as { prototype: Record<string, unknown> }).prototype, ['exec']);
  }
}

async function start(): Promise<() => Promise<void>> {
  countStatements(dialect);
  const { createGuard } = await import('../../src/index.js');
  const cron = await import('node-cron');
  const guard = createGuard({
    database: url as string,
    tablePrefix: `${setup.namespace}_`,
    telemetry: false,
    // Once told to stop, the fires the shutdown skips (GUARD_CLOSED) are not the figure's errors.
    logger: {
      warn: (message) => void (stopRequested || errors.push(`cronguard: ${message}`)),
      error: (message) => void (stopRequested || errors.push(`cronguard: ${message}`)),
    },
  });
  await guard.migrate();
  const plain: { stop(): void | Promise<void> }[] = [];
  for (let job = 0; job < setup.jobs; job += 1) {
    guard.schedule(setup.expression, { name: `scale-${job}`, lockAtMostFor: setup.lockAtMostFor }, (context) => {
      runs.push({ system: 'cronguard', job, slot: context.slot?.getTime() ?? Number.NaN, started: now() });
    });
    // node-cron's context.date is the nominal time of the fire, as the guard's slot is.
    plain.push(
      cron.schedule(setup.expression, (context) => runs.push({ system: 'node-cron', job, slot: context.date.getTime(), started: now() })),
    );
  }
  return async () => {
    for (const task of plain) await task.stop();
    await guard.shutdown({ timeout: '5s' });
  };
}

let stopping: Promise<void> | undefined;
function stopAndExit(stop: () => Promise<void>): void {
  stopping ??= (async () => {
    setTimeout(() => process.exit(1), 15_000).unref();
    try {
      await stop();
    } catch (error) {
      errors.push(error instanceof Error ? error.message : String(error));
    }
    send({ type: 'result', runs, errors, statements: [...statements] }, () => process.exit(0));
  })();
}

let stopRequested = false;
let stopSystem: (() => Promise<void>) | undefined;
const onStop = (): void => {
  stopRequested = true;
  if (stopSystem !== undefined) stopAndExit(stopSystem);
};
process.on('message', (message) => {
  if (message === 'stop') onStop();
});
process.once('disconnect', onStop);

try {
  stopSystem = await start();
  if (stopRequested) stopAndExit(stopSystem);
  else send({ type: 'ready' });
} catch (error) {
  send({ type: 'result', runs: [], errors: [error instanceof Error ? error.message : String(error)], statements: [] }, () =>
    process.exit(1),
  );
}
