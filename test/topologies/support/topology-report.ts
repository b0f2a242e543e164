// The topology figures of one `npm run test:topologies` run, which become a section of RELIABILITY.md.
// Each test file records its figures as JSON lines; the run's global setup renders them at the end
// between the markers below, and the fault report (`npm run test:faults`) keeps that section.
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';

/** What one topology scenario ran and lost, measured on real servers and OS-process replicas. */
export interface TopologyFigure {
  /** The topology, e.g. 'PgBouncer, transaction mode'. */
  readonly topology: string;
  /** What was done to it, e.g. 'steady', 'one node killed at 30 s', 'primary killed, standby promoted'. */
  readonly scenario: string;
  readonly dialect: 'postgres' | 'mysql';
  /** Seconds the replicas ran. */
  readonly seconds: number;
  /** Replica processes. */
  readonly replicas: number;
  /** (job, slot) pairs the schedules had in the measured window. */
  readonly slotsExpected: number;
  /** (job, slot) pairs that ran once. */
  readonly slotsRanOnce: number;
  /** (job, slot) pairs that ran more than once: the number the guarantee is about. */
  readonly duplicated: number;
  /** (job, slot) pairs no replica ran. */
  readonly missed: number;
  /** Other measured numbers, in words: the stall, the window, the time until jobs ran again, what was logged. */
  readonly notes: readonly string[];
}

export const TOPOLOGY_SECTION_START = '<!-- topologies:start (written by `npm run test:topologies`) -->';
export const TOPOLOGY_SECTION_END = '<!-- topologies:end -->';

/** Where figures go during a run (set by the topology suite's global setup). */
export function topologyLogFile(): string | undefined {
  return process.env['CRONGUARD_TOPOLOGY_LOG'];
}

/** Records one scenario's figures for RELIABILITY.md. */
export function recordTopologyFigure(figure: TopologyFigure): void {
  const log = topologyLogFile();
  if (log !== undefined) appendFileSync(log, `${JSON.stringify(figure)}\n`);
}

export function readTopologyFigures(log: string): TopologyFigure[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as TopologyFigure);
}

export function renderTopologySection(figures: readonly TopologyFigure[], seconds: number): string {
  const sorted = [...figures].sort((a, b) => a.topology.localeCompare(b.topology) || a.scenario.localeCompare(b.scenario));
  const rows = sorted.map(
    (f) =>
      `| ${f.topology} | ${f.scenario} | ${f.dialect} | ${f.seconds} s × ${f.replicas} | ${f.slotsExpected} | ${f.slotsRanOnce} | **${f.duplicated}** | ${f.missed} | ${f.notes.join('; ')} |`,
  );
  return [
    TOPOLOGY_SECTION_START,
    '## Production topologies',
    '',
    `Real servers started by \`npm run test:topologies\` on loopback (PgBouncer, a PostgreSQL primary with a streaming standby,`,
    `a 3-node MariaDB Galera cluster), replicas in separate OS processes; ${seconds} s for the whole run. What each promise is:`,
    '[docs/topologies.md](docs/topologies.md).',
    '',
    '| topology | scenario | dialect | ran | slots expected | ran once | ran twice | missed | measured |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
    TOPOLOGY_SECTION_END,
  ].join('\n');
}

/** The RELIABILITY.md text with its topology section replaced by `section` (appended when absent). */
export function withTopologySection(document: string, section: string): string {
  const start = document.indexOf(TOPOLOGY_SECTION_START);
  const end = document.indexOf(TOPOLOGY_SECTION_END);
  if (start === -1 || end === -1 || end < start) return `${document.trimEnd()}\n\n${section}\n`;
  return `${document.slice(0, start)}${section}${document.slice(end + TOPOLOGY_SECTION_END.length)}`;
}

/** The topology section of an existing RELIABILITY.md, for the fault report to keep; '' when none. */
export function existingTopologySection(path: string): string {
  if (!existsSync(path)) return '';
  const document = readFileSync(path, 'utf8');
  const start = document.indexOf(TOPOLOGY_SECTION_START);
  const end = document.indexOf(TOPOLOGY_SECTION_END);
  return start === -1 || end < start ? '' : document.slice(start, end + TOPOLOGY_SECTION_END.length);
}

export function writeTopologySection(path: string, figures: readonly TopologyFigure[], seconds: number): void {
  const document = existsSync(path) ? readFileSync(path, 'utf8') : '# cronguard reliability\n';
  writeFileSync(path, withTopologySection(document, renderTopologySection(figures, seconds)));
}
