// The `cronguard` command reading and changing the tables, through its command line
// (test/support/cronguard-cli.ts), every dialect (test/cli-usage.test.ts: its own output and usage
// errors).
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn } from './support/guards.js';
import { SCHEMA_VERSION } from '../migrations/index.js';
import { cronguard } from './support/cronguard-cli.js';

// Each scenario runs on every dialect at once (its own tables on each): most of its time is the
// cronguard commands it runs one after another, each waiting on its database.
describe('cronguard migrate', () => {
  eachDialectAtOnce(
    'creates the tables, from --database, CRONGUARD_DATABASE_URL or DATABASE_URL',
    async ({ target, expect }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const first = await cronguard(['migrate', '--database', url, '--table-prefix', prefix]);
      expect(first).toMatchObject({
        code: 0,
        stdout: expect.stringMatching(
          new RegExp(`^cronguard: applied 001_create_locks, .*\\(schema version ${SCHEMA_VERSION}\\)\\n$`),
        ) as string,
        stderr: '',
      });
      const again = await cronguard(['migrate', '--table-prefix', prefix], { CRONGUARD_DATABASE_URL: url });
      expect(again.code).toBe(0);
      // CRONGUARD_DATABASE_URL first, then DATABASE_URL (the app's own variable); --database before both.
      const bad = 'foo://not-a-database';
      expect(await cronguard(['migrate', '--table-prefix', prefix], { CRONGUARD_DATABASE_URL: url, DATABASE_URL: bad })).toMatchObject({
        code: 0,
      });
      expect(await cronguard(['migrate', '--table-prefix', prefix], { DATABASE_URL: url })).toMatchObject({ code: 0 });
      expect(await cronguard(['migrate', '--database', url, '--table-prefix', prefix], { CRONGUARD_DATABASE_URL: bad })).toMatchObject({
        code: 0,
      });
      const { guard } = guardOn(url, prefix);
      expect((await guard.run({ name: 'after-cli', lockAtMostFor: '1m' }, () => 1)).executed).toBe(true);
    },
    120_000,
  );
});

describe('cronguard reading the history', () => {
  eachDialectAtOnce(
    'shows locks, history, doctor, prune and unlock, as tables and as JSON',
    async ({ target, expect }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix, { lockedBy: 'replica-a' });
      await guard.migrate();
      const common = ['--database', url, '--table-prefix', prefix];
      expect(await cronguard(['doctor', ...common])).toEqual({ code: 0, stdout: 'No jobs yet.\n', stderr: '' });
      await guard.run({ name: 'healthy', lockAtMostFor: '1m' }, () => sleep(20));
      await guard.run({ name: 'tight', lockAtMostFor: '400ms' }, () => sleep(250));
      // Held ten minutes: the unlock below comes a minute or more later on a loaded machine.
      await guard.run({ name: 'kept', lockAtMostFor: '10m', lockAtLeastFor: '10m' }, () => 1);
      await expect(guard.run({ name: 'broken', lockAtMostFor: '1m' }, () => Promise.reject(new Error('no route')))).rejects.toThrow();

      const locks = await cronguard(['locks', ...common]);
      expect(locks.code).toBe(0);
      expect(locks.stdout.split('\n')[0]).toMatch(/^JOB +STATE +RUNNING +LOCKED BY +VERSION +LOCKED AT +UNTIL +LEFT$/);
      expect(locks.stdout).toMatch(/^kept +held +no +replica-a /m);
      expect(locks.stdout).toMatch(/^healthy +free +no +replica-a /m);
      // The guard records its cronguard version in the background after its first run.
      const version = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
      await expect
        .poll(async () => (await cronguard(['locks', ...common])).stdout, { timeout: 20_000 })
        .toMatch(new RegExp(`^kept +held +no +replica-a +${version.replaceAll('.', '\\.')} `, 'm'));
      const locksJson = JSON.parse((await cronguard(['locks', '--json', ...common])).stdout) as {
        name: string;
        state: string;
      }[];
      expect(locksJson.map((lock) => [lock.name, lock.state])).toEqual([
        ['broken', 'free'],
        ['healthy', 'free'],
        ['kept', 'held'],
        ['tight', 'free'],
      ]);

      const history = await cronguard(['history', '--job', 'broken', ...common]);
      expect(history.code).toBe(0);
      expect(history.stdout).toMatch(/ broken +failed +\d+ ms +no +replica-a +no route\n$/);
      const historyJson = JSON.parse((await cronguard(['history', '--json', '--since', '1h', '--limit', '2', ...common])).stdout) as {
        runs: unknown[];
        next?: string;
      };
      expect(historyJson.runs).toHaveLength(2);
      expect(typeof historyJson.next).toBe('string');
      // The next page, from the cursor: the other two runs, none repeated.
      const nextPage = JSON.parse(
        (await cronguard(['history', '--json', '--since', '1h', '--limit', '2', '--before', historyJson.next ?? '', ...common])).stdout,
      ) as { runs: { id: string }[]; next?: string };
      const ids = [...(historyJson.runs as { id: string }[]), ...nextPage.runs].map((run) => run.id);
      expect(new Set(ids).size).toBe(4);
      expect(nextPage.next).toBeUndefined();

      const doctor = await cronguard(['doctor', ...common]);
      expect(doctor.code).toBe(1);
      expect(doctor.stdout).toMatch(/^tight: longest run \(\d+ ms\) passed half of lockAtMostFor \(400 ms\)$/m);
      expect(doctor.stdout).toMatch(/^healthy +1 +0 +0 +0 /m);
      const doctorJson = JSON.parse((await cronguard(['doctor', '--json', ...common])).stdout) as {
        job: string;
        problems: string[];
      }[];
      expect(doctorJson.filter((job) => job.problems.length > 0).map((job) => job.job)).toEqual(['tight']);

      expect(await cronguard(['unlock', 'kept', ...common])).toMatchObject({ code: 2 });
      expect(await cronguard(['unlock', 'kept', '--force', ...common])).toEqual({
        code: 0,
        stdout: 'Unlocked "kept" (recorded in cronguard audit).\n',
        stderr: '',
      });
      // Nothing to unlock: a free lock, or no lock at all by that name. Exit 1, one line.
      for (const name of ['kept', 'no-such-job']) {
        expect(await cronguard(['unlock', name, '--force', ...common])).toEqual({
          code: 1,
          stdout: `"${name}" was not locked: nothing to unlock.\n`,
          stderr: '',
        });
      }
      expect(JSON.parse((await cronguard(['unlock', 'kept', '--force', '--json', ...common])).stdout)).toEqual({
        job: 'kept',
        unlocked: false,
      });
      expect((await guard.run({ name: 'kept', lockAtMostFor: '1m' }, () => 'again')).executed).toBe(true);

      await sleep(50);
      // Each job keeps its newest run; 'kept' has two, so one goes.
      expect(await cronguard(['prune', '--older-than', '10ms', ...common])).toEqual({
        code: 0,
        stdout: 'Deleted 1 run(s) older than 10ms.\n',
        stderr: '',
      });
      expect((await guard.history()).runs.map((run) => run.job).sort()).toEqual(['broken', 'healthy', 'kept', 'tight']);
    },
    120_000,
  );
});
