import { defineConfig } from 'vitest/config';

// `npm run test:topologies`: production topologies on real servers (PgBouncer, a PostgreSQL standby,
// a Galera cluster), each file starting its own on loopback ports. The files run side by side: their
// replicas mostly wait for the next second, and the servers are separate.
export default defineConfig({
  test: {
    globalSetup: ['test/topologies/support/global-setup.ts'],
    setupFiles: ['test/setup/unhandled-rejections.ts'],
    include: ['test/topologies/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 3,
    testTimeout: 300_000,
    hookTimeout: 180_000,
  },
});
