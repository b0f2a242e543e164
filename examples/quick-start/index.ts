// The quick start from the README, on the embedded SQLite default.
// Run it twice at once in two terminals (`npx tsx examples/quick-start/index.ts`): one prints the
// report, the other prints that it was skipped.
import { setTimeout as sleep } from 'node:timers/promises';
import { createGuard } from 'cronguard';

const guard = createGuard({
  database: process.env.CRONGUARD_DATABASE_URL ?? 'sqlite:./cronguard.sqlite',
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
