import { defineConfig } from 'vitest/config';

/**
 * Files that need the servers to themselves, run one at a time once every other file has ended:
 * they measure a server-wide log (PostgreSQL's WAL: the losers' zero bytes, the smoke test's reads
 * writing none; InnoDB's log sequence number: the MySQL losers writing nothing), which any other
 * file's write would show up in, or load a million rows (which would slow every other file's
 * clock-bound scenarios).
 */
const ALONE = [
  'test/postgres-wal.test.ts',
  'test/losers-write-nothing.test.ts',
  'test/postgres-history-plan.test.ts',
  'test/setup/smoke.test.ts',
];

/**
 * Files that change process-wide state (the default guard, TZ, fake timers, process listeners): each
 * in a process of its own, not one after another in a shared worker as the `suite` project's are.
 */
const OWN_PROCESS = [
  'test/commonjs.test.ts',
  'test/coordinator.test.ts',
  'test/decorators.test.ts',
  'test/nestjs.test.ts',
  'test/options.test.ts',
  'test/outage-logging.test.ts',
  'test/time-zone.test.ts',
];

const common = {
  setupFiles: ['test/setup/unhandled-rejections.ts'],
  pool: 'forks' as const,
  testTimeout: 60_000,
  hookTimeout: 120_000,
  // A poll waits for what the test is about and returns as soon as it holds; its default second was
  // a second of a busy machine's clock, not of the database's work (a MySQL declaration, a replica's
  // first line), with other files running beside it.
  expect: { poll: { timeout: 10_000 } },
};

// One PostgreSQL and one MariaDB for the whole run (the root's global setup; the projects inherit
// what it provides). Files never share rows: each test has its own table prefix (`uniquePrefix`)
// or SQLite file (`databaseUrl`), so that most files run side by side.
export default defineConfig({
  test: {
    globalSetup: ['test/setup/global-setup.ts'],
    projects: [
      {
        test: {
          ...common,
          name: 'suite',
          include: ['test/**/*.test.ts'],
          // The fault scenarios and the topologies run on their own: `npm run test:faults`, `npm run test:topologies`.
          exclude: ['test/faults/**', 'test/topologies/**', '**/node_modules/**', ...ALONE, ...OWN_PROCESS],
          // A worker runs its files one after another in one process: the modules they share load
          // once per worker, not once per file (a file that leaves process-wide state goes in OWN_PROCESS).
          isolate: false,
          // Three files at a time on two cores: most of a file's time is spent waiting (on the
          // clock, on processes starting, on the servers), little of it computing.
          maxWorkers: Number(process.env['CRONGUARD_TEST_WORKERS'] ?? 3),
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...common,
          name: 'own-process',
          include: OWN_PROCESS,
          maxWorkers: Number(process.env['CRONGUARD_TEST_WORKERS'] ?? 3),
          sequence: { groupOrder: 0 },
        },
      },
      {
        test: {
          ...common,
          name: 'alone',
          include: ALONE,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
