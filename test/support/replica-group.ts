import { expect } from 'vitest';
import { databaseUrl, uniquePrefix, type DialectTarget } from './dialects.js';
import { withGuardOn } from './guards.js';
import { startWorker, type Worker } from './processes.js';
import { cronguard as runCronguard } from './cronguard-cli.js';

/** Replica processes on one set of migrated tables, and the `cronguard` command against those tables. */
export interface ReplicaGroup<Message extends { type: string }> {
  readonly url: string;
  readonly prefix: string;
  readonly replicas: Worker<Message>[];
  /** Runs `cronguard <args>` against the replicas' tables; resolves once it has exited 0, with the time it did. */
  cronguard(...args: string[]): Promise<number>;
}

/**
 * Migrates fresh tables on the target, then starts `count` processes of `fixture` (each given the
 * URL, the table prefix and `args`) and waits until every one says 'ready'.
 */
export async function startReplicaGroup<Message extends { type: string }>(
  target: DialectTarget,
  fixture: string,
  count: number,
  args: string[],
): Promise<ReplicaGroup<Message>> {
  const url = databaseUrl(target);
  const prefix = uniquePrefix();
  await withGuardOn(url, prefix, (guard) => guard.migrate());
  const replicas = Array.from({ length: count }, () => startWorker<Message>(fixture, [url, prefix, ...args]));
  await Promise.all(replicas.map((replica) => replica.next('ready')));
  const cronguard = async (...command: string[]): Promise<number> => {
    const result = await runCronguard([...command, '--database', url, '--table-prefix', prefix]);
    expect(result.code, `cronguard ${command.join(' ')}: ${result.stderr}`).toBe(0);
    return Date.now();
  };
  return { url, prefix, replicas, cronguard };
}
