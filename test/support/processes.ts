import { fork, type ChildProcess } from 'node:child_process';
import { compiledFixture } from './compiled-fixtures.js';

/** A worker in its own OS process, running a TypeScript fixture compiled to JavaScript (compiled-fixtures.ts) on the built package. */
export interface Worker<Message> {
  readonly child: ChildProcess;
  /** Resolves with the next message of the given type. */
  next<T extends Message>(type: string): Promise<T>;
  send(message: unknown): void;
  /** Every message received so far, in order. */
  readonly received: readonly Message[];
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /**
   * The slots (epoch ms) whose fire node-cron dropped in this worker: it logs "missed execution at
   * <slot>!" when a timer fires too late on a stalled machine, and runs nothing for that slot.
   */
  readonly droppedFires: readonly number[];
  /** When the worker's first message came (epoch ms), and when it exited (undefined while it runs). */
  readonly alive: { readonly from: number | undefined; readonly until: number | undefined };
}

/** node-cron's warning for a fire it dropped, with the slot's date. */
const NODE_CRON_DROPPED = /missed execution at (.+?)! Possible blocking IO/;

/**
 * Whether every worker alive at `slot` (epoch ms) says node-cron dropped that slot's fire: then no
 * replica fired it, and a slot nobody ran is the machine's stall, not the guard's doing.
 */
export function droppedByAll(workers: readonly Worker<{ type: string }>[], slot: number): boolean {
  const alive = workers.filter(({ alive: { from, until } }) => from !== undefined && from < slot && (until === undefined || until > slot));
  return alive.length > 0 && alive.every((worker) => worker.droppedFires.includes(slot));
}

/**
 * `clockOffset` (e.g. '+30s') runs the worker under Debian's faketime: its wall clock, and so
 * node-cron's timers and slot dates, are off by that much (a faketime spec: '-3629946s x5' also
 * runs its clocks, the monotonic one too, five times as fast). `exposeGc` gives the worker `gc()`,
 * to measure memory after a collection. `env`: variables set for the worker on top of this
 * process's (e.g. `TZ`).
 */
export function startWorker<Message extends { type: string }>(
  fixture: string,
  args: string[],
  options: { clockOffset?: string; exposeGc?: boolean; env?: Record<string, string> } = {},
): Worker<Message> {
  const path = compiledFixture(fixture);
  const nodeArgs = options.exposeGc === true ? ['--expose-gc'] : [];
  const viaFaketime =
    options.clockOffset === undefined ? {} : { execPath: 'faketime', execArgv: ['-f', options.clockOffset, process.execPath, ...nodeArgs] };
  const child = fork(path, args, {
    execArgv: nodeArgs,
    ...viaFaketime,
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } }),
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  // Passed on as it comes; node-cron's dropped fires are noted (`droppedFires`).
  const droppedFires: number[] = [];
  let partial = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    process.stderr.write(chunk);
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const dropped = NODE_CRON_DROPPED.exec(line)?.[1];
      if (dropped !== undefined) droppedFires.push(Math.floor(Date.parse(dropped) / 1_000) * 1_000);
    }
  });
  const alive: { from: number | undefined; until: number | undefined } = { from: undefined, until: undefined };
  const queue: Message[] = [];
  const received: Message[] = [];
  const waiting: { type: string; resolve: (message: Message) => void; reject: (error: Error) => void }[] = [];
  child.on('message', (raw) => {
    alive.from ??= Date.now();
    const message = raw as Message;
    received.push(message);
    const index = waiting.findIndex((entry) => entry.type === message.type);
    if (index === -1) queue.push(message);
    else waiting.splice(index, 1)[0]?.resolve(message);
  });
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      alive.until = Date.now();
      resolve(code);
    }),
  );
  // A worker that sends its last message and exits at once: 'exit' can come before that message
  // is read from the IPC channel (seen in CI: "exited with 0 before done" from a worker that had
  // sent it). 'close' comes once the channel has been read to its end, every message handled.
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  void Promise.all([exited, closed]).then(([code]) => {
    exitCode = code;
    for (const entry of waiting.splice(0)) entry.reject(new Error(`${fixture} exited with ${code} before "${entry.type}"`));
  });
  return {
    child,
    exited,
    received,
    droppedFires,
    alive,
    send: (message) => child.send(message as object),
    next<T extends Message>(type: string): Promise<T> {
      const index = queue.findIndex((message) => message.type === type);
      if (index !== -1) return Promise.resolve(queue.splice(index, 1)[0] as T);
      if (exitCode !== undefined) return Promise.reject(new Error(`${fixture} exited with ${exitCode} before "${type}"`));
      return new Promise<T>((resolve, reject) => waiting.push({ type, resolve: resolve as (message: Message) => void, reject }));
    },
  };
}
