import { Injectable, Logger } from '@nestjs/common';
import { currentExecution } from 'cronguard';
import { Guard, GuardedCron } from 'cronguard/nestjs';

const replica = process.env['REPLICA_NAME'] ?? `replica-${process.pid}`;

@Injectable()
export class ReportsService {
  private readonly logger = new Logger(ReportsService.name);

  // The Guard CronguardModule provides, for guard.run, history() or locks() where needed.
  constructor(private readonly guard: Guard) {}

  /** A fast job, every second: without its slot, a replica whose timer fires late would run it again. */
  @GuardedCron('* * * * * *', { name: 'nest-demo.heartbeat', lockAtMostFor: '10s' })
  async heartbeat(): Promise<void> {
    this.logger.log(`${replica} runs heartbeat for ${slotOf()}`);
  }

  /** A slower job, every 5 seconds, that takes 2 s and stops early when the app shuts down. */
  @GuardedCron('*/5 * * * * *', { name: 'nest-demo.digest', lockAtMostFor: '30s' })
  async digest(): Promise<void> {
    this.logger.log(`${replica} builds the digest for ${slotOf()} (${this.guard.dialect})`);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 2_000);
      currentExecution()?.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

function slotOf(): string {
  return currentExecution()?.slot?.toISOString().slice(11, 19) ?? 'no slot';
}
