import type { Logger } from './logger.js';
import type { ResolvedJob } from './job-options.js';

/**
 * Warns once per job name when a decorated job has neither `cron` nor `lockAtLeastFor`: a method
 * decorator is called by someone else's scheduler, and without a slot a replica whose timer fires
 * a few ms late takes the lock after the first replica's fast run released it, and runs that fire
 * again.
 */
export class UnslottedWarning {
  readonly #warned = new Set<string>();

  constructor(private readonly logger: Logger) {}

  check(job: ResolvedJob): void {
    if (job.cron !== undefined || job.lockAtLeastForMs > 0 || this.#warned.has(job.name)) return;
    this.#warned.add(job.name);
    this.logger.warn(
      `Job "${job.name}" is decorated without \`cron\` and with lockAtLeastFor 0: when a scheduler calls it on ` +
        'several replicas, a fast job can run twice for one fire (a replica whose timer fires late takes the lock after ' +
        'the first run released it). Set `cron` to the expression the scheduler fires it on (in NestJS, use @GuardedCron ' +
        "from 'cronguard/nestjs'), or a lockAtLeastFor longer than the replicas' timer lag, such as '5s'.",
    );
  }
}
