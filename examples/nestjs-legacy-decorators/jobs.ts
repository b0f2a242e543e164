// A NestJS-style service whose cron handlers are guarded, compiled with `experimentalDecorators`
// (as NestJS apps are). The module declares its jobs before the database is configured, so it uses
// the standalone `guarded` decorator; `main` sets the default guard at start-up.
import { currentExecution, guarded, setDefaultGuard, createGuard } from 'cronguard';

export class ReportService {
  readonly sent: string[] = [];

  @guarded({ name: 'daily-digest', lockAtMostFor: '15m', lockAtLeastFor: '1m' })
  async sendDailyDigest(recipient: string): Promise<number | undefined> {
    // In a decorated method the context comes from currentExecution(): stop when signalled.
    const signal = currentExecution()?.signal;
    if (signal?.aborted === true) return 0;
    this.sent.push(recipient);
    return this.sent.length;
  }

  @guarded({ name: 'cleanup', lockAtMostFor: '5m' })
  async cleanup(): Promise<void> {
    this.sent.length = 0;
  }
}

export async function main(): Promise<void> {
  // Required, with no fallback: a replica that fell back on a file of its own would run every job.
  // Unset, createGuard throws a TypeError that says so.
  const guard = createGuard({ database: process.env.CRONGUARD_DATABASE_URL });
  await guard.migrate();
  setDefaultGuard(guard);
  const service = new ReportService();
  const first = await service.sendDailyDigest('ops@example.com');
  const second = await service.sendDailyDigest('ops@example.com'); // skipped: lockAtLeastFor holds the lock
  console.log({ first, second });
  await guard.shutdown();
}

if (process.argv[1]?.endsWith('jobs.js') === true) await main();
