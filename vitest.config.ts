import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/setup/global-setup.ts'],
    setupFiles: ['test/setup/unhandled-rejections.ts'],
    include: ['test/**/*.test.ts'],
    // The fault scenarios and the topologies run on their own: `npm run test:faults`, `npm run test:topologies`.
    exclude: ['test/faults/**', 'test/topologies/**', 'node_modules/**'],
    // One file at a time: a test measures cluster-wide WAL, which other files would disturb.
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
