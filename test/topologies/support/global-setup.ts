// globalSetup of `npm run test:topologies`: each test file starts its own servers (PgBouncer, a
// standby, a Galera cluster); this only collects their figures into RELIABILITY.md at the end.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTopologyFigures, writeTopologySection } from './topology-report.js';

export default function setup(): () => void {
  const log = join(mkdtempSync(join(tmpdir(), 'cronguard-topologies-')), 'figures.jsonl');
  writeFileSync(log, '');
  // Forked test workers inherit the environment of the process that runs the global setup.
  process.env['CRONGUARD_TOPOLOGY_LOG'] = log;
  const started = Date.now();
  return () => {
    const figures = readTopologyFigures(log);
    if (figures.length === 0) return;
    const out = process.env['CRONGUARD_RELIABILITY_OUT'] ?? 'RELIABILITY.md';
    writeTopologySection(out, figures, Math.round((Date.now() - started) / 1_000));
    process.stderr.write(`cronguard: wrote the topology section of ${out} (${figures.length} figures)\n`);
  };
}
