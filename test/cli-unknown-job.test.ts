// `cronguard slots|history|doctor --job` for a name the tables have never seen: exit 2 with the
// nearest known names, through its command line (test/support/cronguard-cli.ts), every dialect.
import { describe } from 'vitest';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn } from './support/guards.js';
import { cronguard } from './support/cronguard-cli.js';

describe('cronguard --job for a name the tables have never seen', () => {
  eachDialectAtOnce(
    'slots, history and doctor exit 2 and name the nearest known jobs; known names still work',
    async ({ target, expect }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      const common = ['--database', url, '--table-prefix', prefix];
      // No job at all yet.
      expect(await cronguard(['slots', '--job', 'nightly', ...common])).toEqual({
        code: 2,
        stdout: '',
        stderr: 'cronguard: --job "nightly": no such job (no lock row, no declared schedule, no run); the tables have no job yet\n',
      });
      for (const name of ['nightly-report', 'nightly-backup', 'cache-warm']) await guard.run({ name, lockAtMostFor: '1m' }, () => 1);
      // Declared, never run: known by its schedule only.
      guard.guarded({ name: 'hourly-sync', lockAtMostFor: '1m', cron: '0 * * * *' });
      await expect.poll(async () => (await guard.slots()).map((ledger) => ledger.job)).toEqual(['hourly-sync']);

      for (const command of ['slots', 'history', 'doctor']) {
        expect(await cronguard([command, '--job', 'nightly-reprot', ...common])).toEqual({
          code: 2,
          stdout: '',
          stderr:
            'cronguard: --job "nightly-reprot": no such job (no lock row, no declared schedule, no run); ' +
            'nearest known: "nightly-report", "nightly-backup", "cache-warm"\n',
        });
        expect((await cronguard([command, '--job', 'hourly-synk', ...common])).stderr).toMatch(/nearest known: "hourly-sync"/);
      }
      // Known names: exit 0 (slots and doctor may exit 1 on problems, not here).
      expect(await cronguard(['slots', '--job', 'cache-warm', ...common])).toMatchObject({
        code: 0,
        stdout: expect.stringMatching(/^Job "cache-warm" has no declared schedule/),
      });
      expect(await cronguard(['slots', '--job', 'hourly-sync', ...common])).toMatchObject({
        code: 0,
        stdout: expect.stringMatching(/hourly-sync/),
      });
      expect(await cronguard(['history', '--job', 'hourly-sync', ...common])).toEqual({ code: 0, stdout: 'No runs.\n', stderr: '' });
      expect(await cronguard(['history', '--job', 'cache-warm', '--status', 'failed', ...common])).toMatchObject({ code: 0 });
      const doctor = JSON.parse((await cronguard(['doctor', '--job', 'cache-warm', '--json', ...common])).stdout) as { job: string }[];
      expect(doctor.map((job) => job.job)).toEqual(['cache-warm']);
    },
    120_000,
  );
});
