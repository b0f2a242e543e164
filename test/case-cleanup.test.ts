// The test support's cleanup: what a test opened is closed when that test ends, and, for cases run
// at once (eachDialectAtOnce), when that case ends, never when another case does.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { closeWhenTestEnds, withOwnCleanup } from './support/case-cleanup.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';

describe('closeWhenTestEnds', () => {
  it('inside withOwnCleanup, closes what that case registered (through awaits) when it ends, and nothing of a case still running', async () => {
    const closed: string[] = [];
    let endSlow!: () => void;
    const slowMayEnd = new Promise<void>((resolve) => (endSlow = resolve));
    const slow = withOwnCleanup(async () => {
      await Promise.resolve();
      closeWhenTestEnds(async () => void closed.push('slow'));
      await slowMayEnd;
    });
    await withOwnCleanup(async () => {
      await sleep(1);
      closeWhenTestEnds(async () => void closed.push('quick'));
    });
    expect(closed).toEqual(['quick']);
    endSlow();
    await slow;
    expect(closed).toEqual(['quick', 'slow']);
  });

  // Before, an afterEach closed every guard a test had opened as each concurrent test ended: the
  // case that ended first closed the guards of the others.
  const order = { sqlite: 0, postgres: 1, mysql: 2 } as const;
  eachDialectAtOnce(
    "keeps a case's guards open until that case ends, whichever case ends first",
    async ({ target, expect: caseExpect, together }) => {
      const { guard } = await migratedGuard(target);
      await together();
      // The cases end one after another, a second apart.
      await sleep(order[target.name] * 1_000);
      caseExpect((await guard.run({ name: 'still-open', lockAtMostFor: '1m' }, () => 'ok')).executed).toBe(true);
    },
  );
});
