// The quick start from the README, on SQLite, the embedded database that needs no server.
// Run it twice at once in two terminals (`npx tsx examples/quick-start/index.ts`): one prints the
// report, the other prints that it was skipped.
import { setTimeout as sleep } from 'node:timers/promises';
import { createGuard } from 'cronguard';

const guard = createGuard({
  // Both terminals share this file, on one host. Replicas on several hosts share a server instead:
  // pass its URL (postgres://…, mysql://…, mariadb://…). There is no default: a replica that fell
  // back on a file of its own would run every job.
  database: 'sqlite:./cronguard.sqlite',
  defaults: { lockAtMostFor: '10m' },
});
await guard.migrate();

const result = await guard.run({ name: 'nightly-report', lockAtMostFor: '1m', lockAtLeastFor: '5s' }, async (ctx) => {
  console.log(`${process.pid}: building the report`);
  await sleep(2_000, undefined, { signal: ctx.signal });
  return 42;
});

if (result.executed) console.log(`${process.pid}: done, value ${result.value}`);
else if (result.reason !== 'error') console.log(`${process.pid}: skipped (${result.reason}), another replica ran it`);
else console.log(`${process.pid}: skipped, the guard could not reach its database: ${result.error.message}`);

await guard.close();
