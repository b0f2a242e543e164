// The scheduled job on MySQL or MariaDB: `CRONGUARD_DATABASE_URL=mysql://… npx tsx examples/mysql/index.ts` (or mariadb://…)
// Start it on several machines (or terminals): each slot runs on one of them.
import { createGuard } from 'cronguard';

const url = process.env.CRONGUARD_DATABASE_URL;
if (url === undefined || !/^(mysql|mariadb):\/\//.test(url)) throw new Error('Set CRONGUARD_DATABASE_URL to a mysql:// or mariadb:// URL');

const guard = createGuard({ database: url, defaults: { lockAtMostFor: '10m' } });
await guard.migrate();

guard.schedule('*/10 * * * * *', { name: 'sync-invoices', lockAtMostFor: '1m' }, async (ctx) => {
  console.log(`${process.pid} syncs invoices for the slot ${ctx.slot?.toISOString()}`);
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void guard.shutdown({ timeout: '20s' }).then(() => process.exit(0)));
}
