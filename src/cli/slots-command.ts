import type { Guard } from '../guard/create-guard.js';
import { type LedgerSlot, SLOT_OUTCOMES, type SlotOutcome } from '../core/slot-ledger.js';
import type { CommandOptions, CommandOutput } from './commands.js';
import { formatTable, printable } from './format.js';
import { formatTime } from '../core/duration.js';
import { assertKnownJob, timeArgument } from './arguments.js';

/** Outcomes listed per slot (all but a success and a run still going); the others are only counted. */
const LISTED: ReadonlySet<SlotOutcome> = new Set(SLOT_OUTCOMES.filter((outcome) => outcome !== 'succeeded' && outcome !== 'running'));
/** At most this many slots are listed per job in the text output (--json has them all). */
const MAX_LISTED = 50;

/**
 * `cronguard slots [--job J] [--since 24h | ISO] [--until 1h | ISO]`: per job, how many of its
 * expected slots had each outcome, then the slots that need a look (missed, late, failed, …),
 * newest last, and a job whose last replica stopped cleanly. Exit 1 when a slot was missed, late or
 * failed, so that a script can alert on it.
 */
export async function slotsCommand(guard: Guard, options: CommandOptions): Promise<CommandOutput> {
  const ledgers = await guard.slots({
    ...(options.job === undefined ? {} : { job: options.job }),
    since: timeArgument(options.since ?? '24h', '--since'),
    ...(options.until === undefined ? {} : { until: timeArgument(options.until, '--until') }),
  });
  // No ledger for a --job: a typo (exit 2) unless the tables know the job, which then has no schedule.
  if (options.job !== undefined && ledgers.length === 0) {
    await assertKnownJob(guard, options.job);
    return {
      text: `Job "${printable(options.job)}" has no declared schedule (guard.schedule, a coordinator or a decorated job with \`cron\` declares one).\n`,
      json: ledgers,
      exitCode: 0,
    };
  }
  const summary = formatTable(
    ['job', 'schedule', 'slots', ...SLOT_OUTCOMES, 'since', 'until'],
    ledgers.map((ledger) => [
      ledger.job + (ledger.retired ? ' (retired)' : ''),
      `${ledger.expression}${ledger.timezone === null ? '' : ` ${ledger.timezone}`}`,
      String(ledger.slots.length) + (ledger.truncated ? ' (newest)' : ''),
      ...SLOT_OUTCOMES.map((outcome) => String(ledger.counts[outcome])),
      formatTime(ledger.since),
      ledger.stoppedAt === null ? formatTime(ledger.until) : `${formatTime(ledger.until)} (stopped)`,
    ]),
  );
  // A job whose schedule this reader cannot use: its problem and fix, first; the other jobs as ever.
  const problems = ledgers.flatMap((ledger) => (ledger.problem === undefined ? [] : [printable(`${ledger.job}: ${ledger.problem}`)]));
  const details = ledgers.flatMap((ledger) =>
    ledger.slots
      .filter((entry) => LISTED.has(entry.outcome))
      .slice(-MAX_LISTED)
      .map((entry) =>
        printable(
          `${ledger.job}: ${formatTime(entry.slot)} ${entry.outcome}${entry.delayMs === null ? '' : ` (started ${entry.delayMs} ms after)`}` +
            heldByText(entry),
        ),
      ),
  );
  // A job whose replicas all stopped cleanly: why its slots end there (not an outage).
  const stopped = ledgers.flatMap((ledger) =>
    ledger.stoppedAt === null
      ? []
      : [
          printable(
            `${ledger.job}: stopped at ${formatTime(ledger.stoppedAt)} (its last replica shut down cleanly): no slot is expected until a replica schedules it again`,
          ),
        ],
  );
  const listed = [...problems, ...details];
  const text =
    ledgers.length === 0
      ? 'No declared schedules yet (guard.schedule, a coordinator or a decorated job with `cron` declares one).\n'
      : `${summary}${listed.length === 0 ? '\nEvery slot accounted for.\n' : `\n${listed.join('\n')}\n`}${stopped.map((line) => `${line}\n`).join('')}`;
  const bad = ledgers.some(
    (ledger) => ledger.problem !== undefined || ledger.counts.missed + ledger.counts.late + ledger.counts.failed > 0,
  );
  return { text, json: ledgers, exitCode: bad ? 1 : 0 };
}

/** What held an overlapped slot's lock: a manual run still running (who triggered it), or a run still holding it. */
function heldByText(entry: LedgerSlot): string {
  if (entry.heldBy === undefined) return '';
  return entry.heldBy.triggeredBy === null
    ? ` (the job was still running: run ${entry.heldBy.runId} held the lock)`
    : ` (a manual run triggered by ${entry.heldBy.triggeredBy} was still running: run ${entry.heldBy.runId})`;
}
