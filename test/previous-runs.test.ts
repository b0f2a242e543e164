// The slot ledger's live side reads, for each win of a slot that another replica's run came
// before, the newest earlier run of that job (SlotWatch's gap check). The wins of one tick ask
// together, and their questions go as one statement (issue 19): read here on every dialect.
import { sql, type CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PreviousRunReader } from '../src/admin/history.js';
import { quotedTable } from '../src/dialects/common/quote.js';
import { dialectOfUrl } from '../src/dialects/connect.js';
import { resolveTableNames } from '../src/dialects/table-names.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';

const slot = (minute: number): Date => new Date(Date.UTC(2030, 0, 1, 0, minute));

describe.each(dialectTargets())('the previous runs of the wins of one tick on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('answers each job with its own newest earlier run, in one statement for the tick', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      await guard.run({ name: 'a', lockAtMostFor: '1m', slot: slot(1) }, () => undefined);
      await guard.run({ name: 'a', lockAtMostFor: '1m', slot: slot(2) }, () => undefined);
      await guard
        .run({ name: 'b', lockAtMostFor: '1m', slot: slot(1) }, () => {
          throw new Error('b failed');
        })
        .catch(() => undefined);
      await guard.run({ name: 'c', lockAtMostFor: '1m', slot: slot(5) }, () => undefined);

      const log: CompiledQuery[] = [];
      const db = loggedKysely(target, url, log);
      try {
        const dialect = dialectOfUrl(url);
        const runs = sql.raw(quotedTable(resolveTableNames(prefix, dialect), 'runs', dialect.quote));
        const reader = new PreviousRunReader(db, dialect, runs);
        const answers = await Promise.all([
          reader.previousRun('a', slot(3)),
          reader.previousRun('b', slot(3)),
          reader.previousRun('c', slot(3)),
          reader.previousRun('never', slot(3)),
          reader.previousRun('a', slot(2)),
        ]);
        expect(answers.map((run) => run && { slot: run.slot.getTime(), status: run.status })).toEqual([
          { slot: slot(2).getTime(), status: 'succeeded' },
          { slot: slot(1).getTime(), status: 'failed' },
          null,
          null,
          // A second question about one job in the turn, with its own answer.
          { slot: slot(1).getTime(), status: 'succeeded' },
        ]);
        expect(answers[0]?.finishedAt).toBeInstanceOf(Date);
        // The first question at once, the three that follow it in the turn together, and the
        // second question about a job already asked in the turn alone (core/tick-batch.ts).
        expect(log).toHaveLength(3);
        // Alone, one question is one statement too.
        log.length = 0;
        expect((await reader.previousRun('c', slot(6)))?.slot.getTime()).toBe(slot(5).getTime());
        expect(log).toHaveLength(1);
      } finally {
        await db.destroy();
      }
    });
  });
});
