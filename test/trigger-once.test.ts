// "Run now" asked twice runs once, on every dialect: guard.trigger() while a request of the job is
// pending returns that request (from any guard, at once or one after the other; a forced ask makes
// it forced), and a dashboard "Run now" form submitted twice creates one trigger, even when the
// first was already run before the second arrived (the form's submission key).
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Guard } from '../src/index.js';
import { serve } from './support/dashboard.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { formSecrets, rawRequest } from './support/raw-http.js';

async function triggers(guard: Guard, job: string): Promise<{ pending: { by: string; force: boolean } | null; audit: string[] }> {
  const pending = (await guard.locks()).find((lock) => lock.name === job)?.pendingTrigger ?? null;
  return {
    pending: pending === null ? null : { by: pending.by, force: pending.force },
    audit: (await guard.controls(job)).map((record) => `${record.action} ${record.by}${record.reason === null ? '' : ` ${record.reason}`}`),
  };
}

describe.each(dialectTargets())('one run per "run now" on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('guard.trigger() while a request is pending returns it; once it is taken, the next is a new one', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { controlPollInterval: '200ms' });
      const other = guardOn(url, prefix).guard;
      // No lock row yet: the first creates it.
      const first = await guard.trigger('report', { by: 'alice' });
      expect(await other.trigger('report', { by: 'bob' })).toBe(first);
      expect(await Promise.all([guard.trigger('report', { by: 'carol' }), other.trigger('report', { by: 'dave' })])).toEqual([
        first,
        first,
      ]);
      expect(await triggers(guard, 'report')).toEqual({ pending: { by: 'alice', force: false }, audit: ['trigger alice'] });
      // A forced ask makes the pending request forced (recorded), still the same request.
      expect(await other.trigger('report', { by: 'erin', force: true })).toBe(first);
      expect(await guard.trigger('report', { by: 'frank', force: true })).toBe(first);
      expect(await triggers(guard, 'report')).toEqual({
        pending: { by: 'alice', force: true },
        audit: ['trigger erin forced', 'trigger alice'],
      });

      // A replica that schedules the job takes it and runs it once; then a trigger is a new request.
      const ran: string[] = [];
      const task = guard.schedule('0 0 1 1 *', { name: 'report', lockAtMostFor: '1m' }, () => void ran.push('ran'));
      await expect.poll(() => ran.length, { timeout: 10_000 }).toBe(1);
      await expect.poll(async () => (await triggers(guard, 'report')).pending).toBeNull();
      const second = await other.trigger('report', { by: 'bob' });
      expect(second).not.toBe(first);
      await expect.poll(() => ran.length, { timeout: 10_000 }).toBe(2);
      await task.destroy();
      expect((await guard.history({ job: 'report' })).runs.map((run) => run.triggeredBy)).toEqual(['bob', 'alice']);
    });

    it('a dashboard "Run now" form submitted twice creates one trigger, even after the first has run', async () => {
      const { guard } = await migratedGuard(target, { controlPollInterval: '200ms' });
      const ran: string[] = [];
      const task = guard.schedule('0 0 1 1 *', { name: 'report', lockAtMostFor: '1m' }, () => void ran.push('ran'));
      const dashboard = await serve(guard.dashboard({ readOnly: false, authorize: () => true }));
      // The job page has its controls once the schedule is declared (guard.schedule declares in the
      // background: on a loaded machine, after this first request).
      let secrets = { cookie: '', csrf: '', submission: '' };
      await expect
        .poll(async () => (secrets = formSecrets(await rawRequest(`${dashboard}/job?name=report`))).submission, { timeout: 10_000 })
        .toMatch(/^[\w-]{22}$/);
      const { cookie, csrf, submission } = secrets;
      const submit = (key: string) =>
        rawRequest(`${dashboard}/job/trigger`, {
          method: 'POST',
          headers: { Cookie: cookie, Origin: dashboard },
          form: { csrf, job: 'report', submission: key },
        });
      // A double click: both at once.
      const twice = await Promise.all([submit(submission), submit(submission)]);
      expect(twice.map((answer) => [answer.status, answer.headers.location])).toEqual([
        [303, '/job?name=report&notice=triggered'],
        [303, '/job?name=report&notice=triggered'],
      ]);
      await expect.poll(() => ran.length, { timeout: 10_000 }).toBe(1);
      // Sent again once the run is over (a browser resending the POST): the same answer, nothing asked.
      expect((await submit(submission)).status).toBe(303);
      expect(await triggers(guard, 'report')).toEqual({ pending: null, audit: ['trigger dashboard'] });
      // Five polls: a request would have been run by now.
      await sleep(1_000);
      expect(ran).toEqual(['ran']);
      // A new page's form is a new submission.
      const again = formSecrets(await rawRequest(`${dashboard}/job?name=report`, { headers: { Cookie: cookie } }));
      expect(again.submission).not.toBe(submission);
      expect((await submit(again.submission)).status).toBe(303);
      await expect.poll(() => ran.length, { timeout: 10_000 }).toBe(2);
      expect((await triggers(guard, 'report')).audit).toEqual(['trigger dashboard', 'trigger dashboard']);
      await task.destroy();
    });
  });
});
