// One replica of figure 7 (tick-to-start latency). argv: system url setup-json, where setup is a
// TickWorkerSetup from tick-latency.ts: the parent owns every setting, so that the report states
// exactly what the replicas ran with. Each job body tells the parent, over IPC, which job it is,
// the slot (nominal time) it is for, and when it started; the parent does all the arithmetic.
import { subscribe } from 'node:diagnostics_channel';
import type { TaskList } from 'graphile-worker';
import type { TimelineNote } from './fire-timeline.js';
import type { TickMessage, TickSystem, TickWorkerSetup } from './tick-latency.js';

const [systemArg, url, setupArg] = process.argv.slice(2);
if (url === undefined || setupArg === undefined) throw new Error('usage: tick-latency-worker system url setup-json');
const system = systemArg as TickSystem;
const setup = JSON.parse(setupArg) as TickWorkerSetup;
const jobs = Array.from({ length: setup.jobs }, (_, job) => job);

/** Wall-clock milliseconds with sub-millisecond resolution (cronguard's latency is a few ms). */
const now = (): number => performance.timeOrigin + performance.now();

/** Sends to the parent; `then` runs once the message is out (or at once without a parent). */
function send(message: TickMessage, then?: () => void): void {
  if (process.send === undefined) throw new Error('tick-latency-worker must be forked with an IPC channel');
  // After the parent is gone, a send would raise ERR_IPC_CHANNEL_CLOSED; we are stopping anyway.
  if (!process.connected) then?.();
  else if (then === undefined) process.send(message);
  else process.send(message, () => then());
}

/**
 * With `setup.timeline`, the steps of every fire (src/core/fire-timeline.ts, and `body` for a
 * system that publishes none), kept here and sent once at the stop: a message per step, sent
 * during the tick, would be part of what it measures.
 */
const steps: TimelineNote[] = [];
if (setup.timeline === true) {
  // The channel's name, not its module: the guard is loaded below, and publishes on the same channel.
  subscribe('cronguard:fire-timeline', (note) => steps.push(note as TimelineNote));
}

function report(job: number, slot: number): void {
  const started = now();
  // Date.now() beside it: a gap between the two clocks would show in every figure of this file.
  if (setup.timeline === true) steps.push({ step: 'body', names: [`tick-${job}`], slot, at: started, wall: Date.now() });
  send({ type: 'run', job, slot, started });
}

function reportError(error: unknown, then?: () => void): void {
  send({ type: 'error', message: error instanceof Error ? error.message : String(error) }, then);
}

/** Starts this replica's system; resolves to its clean stop. */
async function startCronguard(): Promise<() => Promise<void>> {
  const { createGuard } = await import('../../src/index.js');
  const guard = createGuard({
    database: url as string,
    tablePrefix: `${setup.namespace}_`,
    telemetry: false,
    logger: {
      warn: (message) => reportError(`cronguard: ${message}`),
      error: (message) => reportError(`cronguard: ${message}`),
    },
  });
  // What every replica does at start-up; also opens the pool's first connection.
  await guard.migrate();
  for (const job of jobs) {
    // The slot is node-cron's nominal time for this fire, as the guard keys its lock on it.
    guard.schedule(setup.expression, { name: `tick-${job}`, lockAtMostFor: setup.cronguard.lockAtMostFor }, (context) => {
      report(job, context.slot?.getTime() ?? Number.NaN);
    });
  }
  return () => guard.shutdown({ timeout: '5s' });
}

async function startPgBoss(): Promise<() => Promise<void>> {
  const { default: PgBoss } = await import('pg-boss');
  const { cronMonitorIntervalSeconds, cronWorkerIntervalSeconds, pollingIntervalSeconds } = setup.pgBoss;
  const boss = new PgBoss({
    connectionString: url,
    schema: `${setup.namespace}_pgboss`,
    cronMonitorIntervalSeconds,
    cronWorkerIntervalSeconds,
  });
  boss.on('error', (error) => reportError(error));
  await boss.start();
  for (const job of jobs) {
    const name = `tick-${job}`;
    // pg-boss 10: a schedule belongs to a queue of the same name, which must exist first.
    await boss.createQueue(name);
    await boss.schedule(name, setup.expression);
    // A pg-boss job does not carry the cron slot it was made for: the slot of a once-a-minute
    // schedule is the latest minute boundary before the job starts (a start 60 s late would be
    // counted against the next slot, and show as a duplicate and a miss).
    await boss.work(name, { pollingIntervalSeconds }, async () => report(job, Math.floor(now() / 60_000) * 60_000));
  }
  return () => boss.stop({ graceful: true, timeout: 5_000 });
}

async function startGraphileWorker(): Promise<() => Promise<void>> {
  const { run, Logger } = await import('graphile-worker');
  const taskList: TaskList = {};
  for (const job of jobs) {
    // Crontab jobs carry their nominal time as payload._cron.ts (an ISO string).
    taskList[`tick_${job}`] = (payload) => {
      const cron = (payload as { _cron?: { ts?: unknown } } | null)?._cron;
      report(job, typeof cron?.ts === 'string' ? Date.parse(cron.ts) : Number.NaN);
    };
  }
  const runner = await run({
    connectionString: url,
    schema: `${setup.namespace}_graphile`,
    concurrency: setup.graphileWorker.concurrency,
    pollInterval: setup.graphileWorker.pollInterval,
    // The parent stops us over IPC; graphile's own SIGINT/SIGTERM handlers would exit the process.
    noHandleSignals: true,
    crontab: jobs.map((job) => `${setup.expression} tick_${job}`).join('\n'),
    taskList,
    // Errors and warnings go to the parent; its info lines (a line per job) would drown the bench.
    logger: new Logger(() => (level, message) => {
      if (`${level}` === 'error' || `${level}` === 'warning') reportError(`graphile-worker ${level}: ${message}`);
    }),
  });
  return () => runner.stop();
}

/** node-cron alone, the floor a user has without cronguard: the slot is node-cron's context.date. */
async function startNodeCron(): Promise<() => Promise<void>> {
  const { schedule } = await import('node-cron');
  const tasks = jobs.map((job) =>
    schedule(setup.expression, (context) => report(job, context.date.getTime()), { name: `plain-${setup.namespace}-${job}` }),
  );
  return async () => {
    await Promise.all(tasks.map((task) => task.destroy()));
  };
}

const starters: Record<TickSystem, () => Promise<() => Promise<void>>> = {
  cronguard: startCronguard,
  'node-cron': startNodeCron,
  'pg-boss': startPgBoss,
  'graphile-worker': startGraphileWorker,
};

let stopping: Promise<void> | undefined;
/** Stops the system, then exits. A stop that hangs must not leave the process behind: exit after 15 s anyway. */
function stopAndExit(stop: () => Promise<void>): Promise<void> {
  stopping ??= (async () => {
    setTimeout(() => process.exit(1), 15_000).unref();
    try {
      await stop();
    } catch (error) {
      reportError(error);
    }
    if (setup.timeline === true) send({ type: 'steps', steps });
    send({ type: 'stopped' }, () => process.exit(0));
  })();
  return stopping;
}

// Listening before the system starts: a 'stop' (or the parent's death, which closes the IPC
// channel) that arrives during start-up stops the system as soon as it is up.
let stopRequested = false;
let stopSystem: (() => Promise<void>) | undefined;
const onStop = (): void => {
  stopRequested = true;
  if (stopSystem !== undefined) void stopAndExit(stopSystem);
};
process.on('message', (message) => {
  if (message === 'stop') onStop();
});
process.once('disconnect', onStop);

try {
  const starter = starters[system];
  if (starter === undefined) throw new Error(`unknown system ${String(system)}`);
  stopSystem = await starter();
  if (stopRequested) void stopAndExit(stopSystem);
  else send({ type: 'ready' });
} catch (error) {
  reportError(error, () => process.exit(1));
}
