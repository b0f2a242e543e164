// globalSetup of `npm run test:faults`: the shared servers of the unit suite, plus a log for the
// scenario reports, which becomes RELIABILITY.md when the run ends.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import startServers from '../../setup/global-setup.js';
import { existingTopologySection } from '../../topologies/support/topology-report.js';
import { renderReliability, serverVersions } from './reliability-report.js';
import type { ScenarioReport } from './scenario.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stopServers = await startServers(project);
  const log = join(mkdtempSync(join(tmpdir(), 'cronguard-faults-')), 'reports.jsonl');
  writeFileSync(log, '');
  project.provide('reliabilityLog', log);
  const started = Date.now();
  return async () => {
    try {
      const reports = readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as ScenarioReport);
      if (reports.length > 0) {
        const versions = await serverVersions({
          postgres: project.getProvidedContext().postgresUrl,
          mysql: project.getProvidedContext().mysqlUrl,
        });
        const out = process.env['CRONGUARD_RELIABILITY_OUT'] ?? 'RELIABILITY.md';
        // The topology section comes from `npm run test:topologies`: kept as it is.
        const topologies = existingTopologySection(out);
        const report = renderReliability(reports, versions, Math.round((Date.now() - started) / 1_000));
        writeFileSync(out, topologies === '' ? report : `${report.trimEnd()}\n\n${topologies}\n`);
        process.stderr.write(`cronguard: wrote ${out} (${reports.length} scenario reports)\n`);
      }
    } finally {
      await stopServers();
    }
  };
}
