// One replica of an app: schedules the same guarded job every second, like every other replica.
// Started by demo.ts, which sends the instant to stop at; stops on SIGTERM/SIGINT too.
import { setTimeout as sleep } from 'node:timers/promises';
import { createGuard } from 'cronguard';

const name = process.env.REPLICA_NAME ?? `replica-${process.pid}`;
// SQLite, the embedded database that needs no server: one file, ./cronguard.sqlite in the folder
// demo.ts starts every replica in, shared by all of them (they run on one host).
const guard = createGuard({ database: 'sqlite:./cronguard.sqlite', lockedBy: name });
await guard.migrate();

guard.schedule('* * * * * *', { name: 'demo-report', lockAtMostFor: '10s' }, async (ctx) => {
  process.stdout.write(`${name} runs the slot ${ctx.slot?.toISOString().slice(11, 19)}\n`);
  await sleep(300, undefined, { signal: ctx.signal });
});

const stop = async (): Promise<void> => {
  await guard.shutdown({ timeout: '5s' });
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
process.once('message', (message) => {
  const { stopAt } = message as { stopAt: number };
  setTimeout(() => void stop(), stopAt - Date.now());
});
process.send?.({ type: 'ready' });
