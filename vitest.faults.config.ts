import { defineConfig } from 'vitest/config';

// `npm run test:faults`: the fault scenarios of RELIABILITY.md, after the unit suite.
export default defineConfig({
  test: {
    globalSetup: ['test/faults/support/global-setup.ts'],
    setupFiles: ['test/setup/unhandled-rejections.ts'],
    include: ['test/faults/**/*.test.ts'],
    // One file at a time: scenarios start many OS processes and stop servers; on 2 cores they
    // would disturb each other's timing.
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 180_000,
    hookTimeout: 120_000,
  },
});
