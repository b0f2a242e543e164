// MySQL has no RETURNING, so a run starts with a second statement after the take. When its reply
// is lost (the INSERT committed, the connection dropped before the answer), the run row must still
// end in a final status, and the lock must not stay held. A real server behind a TCP proxy that
// drops that one reply.
import { describe, expect, it } from 'vitest';
import { dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';
import { startReplyDropper } from './support/mysql-reply-dropper.js';

const mysqlTarget = dialectTargets().find((target) => target.name === 'mysql');

describe.skipIf(mysqlTarget?.serverUrl === null || mysqlTarget === undefined)(
  'MySQL: a lost reply to the statement that starts a run',
  () => {
    it('marks the run abandoned and frees the lock, so that no row stays running and the next run goes ahead', async () => {
      const dropper = await startReplyDropper(mysqlTarget?.serverUrl ?? '');
      try {
        const prefix = uniquePrefix();
        const { guard, logger } = guardOn(dropper.url, prefix);
        await guard.migrate();
        // Once on a connection that is gone, then as usual.
        expect(await guard.run({ name: 'before', lockAtMostFor: '1m' }, () => 0)).toEqual({ executed: true, value: 0 });
        dropper.arm((sql) => sql.startsWith(`INSERT INTO \`${prefix}runs\``) && sql.includes("'running'"));
        let ran = false;
        const lost = await guard.run({ name: 'lost-reply', lockAtMostFor: '1m' }, () => {
          ran = true;
        });
        expect(dropper.dropped).toBe(1);
        expect(ran).toBe(false);
        expect(lost).toMatchObject({ executed: false, reason: 'error' });
        // The row the lost INSERT wrote is final, and nothing is left running.
        const { runs } = await guard.history({ job: 'lost-reply' });
        expect(runs.map((run) => run.status)).toEqual(['abandoned']);
        expect((await guard.history({ status: 'running' })).runs).toEqual([]);
        expect((await guard.doctor()).flatMap((job) => job.problems).filter((problem) => problem.includes("still 'running'"))).toEqual([]);
        // The lock was given back: the next run does not wait for lockAtMostFor.
        expect(await guard.run({ name: 'lost-reply', lockAtMostFor: '1m' }, () => 1)).toEqual({
          executed: true,
          value: 1,
        });
        expect((await guard.history({ job: 'lost-reply' })).runs.map((run) => run.status)).toEqual(['succeeded', 'abandoned']);
        expect(logger.errors.length).toBeGreaterThan(0);
      } finally {
        await dropper.close();
      }
    });
  },
);
