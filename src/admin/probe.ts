import { sql, type Kysely } from 'kysely';
import type { Dialect, DialectName, TableNames, ServerFacts } from '../core/dialect.js';
import { messageOf, describeValue } from '../core/errors.js';
import { quotedTable } from '../dialects/common/quote.js';
import { dialectOfUrl } from '../dialects/connect.js';
import { toDate } from './run-record.js';

/** What `guard.probe()` and `cronguard doctor --probe` check, in the order they report. */
export type ProbeCheckName =
  'server' | 'read-only' | 'autocommit' | 'transaction-pooling' | 'cluster' | 'clock' | 'node-clocks' | 'exclusivity';

/** `pass`: fine; `warn`: works, with a caveat the fix explains; `fail`: the guard cannot keep its promise here. */
export type ProbeStatus = 'pass' | 'warn' | 'fail';

export interface ProbeCheck {
  readonly check: ProbeCheckName;
  readonly status: ProbeStatus;
  /** What was measured or read, in one sentence. */
  readonly finding: string;
  /** What to do about it; undefined when there is nothing to do. */
  readonly fix: string | undefined;
}

export interface ProbeReport {
  readonly dialect: DialectName;
  /** The server and its version, as it says. */
  readonly server: string;
  /** The worst status among the checks. */
  readonly status: ProbeStatus;
  readonly checks: readonly ProbeCheck[];
}

export interface ProbeOptions {
  /**
   * Other URLs of the same database (the other nodes of a Galera cluster, a standby), whose clocks
   * are compared with this one's and each other's: on a multi-primary cluster each node stamps
   * lock rows with its own clock.
   * @default []
   */
  readonly nodes?: readonly string[];
  /**
   * Connections that race for one probe lock at once in the exclusivity check (exactly one must
   * win); 0 leaves the race out (it writes a lock row, then deletes it).
   * @default 4
   */
  readonly contenders?: number;
}

/** How the exclusivity race went: the guard layer runs it, with guards of their own (guard/probe-race.ts). */
export interface ProbeRaceResult {
  readonly contenders: number;
  readonly winners: number;
  /** The errors of contenders that neither won nor lost cleanly. */
  readonly errors: readonly string[];
}

export interface ProbeTarget {
  readonly db: Kysely<unknown>;
  readonly dialect: Dialect;
  readonly native: unknown;
  readonly tables: TableNames;
  /** Runs the exclusivity race over `contenders` connections for the lock `name`. */
  race(name: string, contenders: number): Promise<ProbeRaceResult>;
}

/** App clock against a database clock beyond this (minus the round trip's error bar) is a warning. */
export const CLOCK_TOLERANCE_MS = 1_000;
const CLOCK_READINGS = 3;

/** The active checks of `guard.probe()`: reads the server, measures the clocks, races for a probe lock. */
export async function probeDatabase(target: ProbeTarget, options: ProbeOptions = {}): Promise<ProbeReport> {
  const { db, dialect } = target;
  const { nodes = [], contenders = 4 } = validateProbeOptions(options);
  const facts = await dialect.inspectServer(db, target.native);
  const checks: ProbeCheck[] = [serverCheck(facts), readOnlyCheck(facts), autocommitCheck(facts)];
  if (dialect.name === 'postgres') checks.push(poolingCheck(facts));
  if (facts.cluster !== undefined) checks.push(clusterCheck(facts));
  const clock = await measureClock(db, dialect);
  checks.push(clockCheck(clock));
  if (nodes.length > 0) checks.push(await nodeClocksCheck(clock, nodes));
  if (contenders > 0 && facts.readOnly === undefined) checks.push(await exclusivityCheck(target, contenders));
  const status = checks.some((c) => c.status === 'fail') ? 'fail' : checks.some((c) => c.status === 'warn') ? 'warn' : 'pass';
  return { dialect: dialect.name, server: facts.version, status, checks };
}

const MAX_CONTENDERS = 32;

function validateProbeOptions(options: ProbeOptions): ProbeOptions {
  const { nodes, contenders } = options;
  if (nodes !== undefined && (!Array.isArray(nodes) || nodes.some((node) => typeof node !== 'string' || node === ''))) {
    throw new TypeError(`Expected \`nodes\` of the probe to be a list of database URLs, got ${describeValue(nodes)}`);
  }
  if (contenders !== undefined && (!Number.isInteger(contenders) || contenders < 0 || contenders > MAX_CONTENDERS)) {
    throw new TypeError(
      `Expected \`contenders\` of the probe to be a whole number from 0 to ${MAX_CONTENDERS}, got ${describeValue(contenders)}`,
    );
  }
  return options;
}

const check = (name: ProbeCheckName, status: ProbeStatus, finding: string, fix?: string): ProbeCheck => ({
  check: name,
  status,
  finding,
  fix,
});

function serverCheck(facts: ServerFacts): ProbeCheck {
  const settings = Object.entries(facts.settings)
    .map(([name, value]) => `${name}=${value === '' ? "''" : value}`)
    .join(', ');
  if (facts.settings['journal_mode'] !== undefined && facts.settings['journal_mode'].toLowerCase() !== 'wal') {
    return check(
      'server',
      'warn',
      `${facts.version}, ${settings}`,
      'the guard switches its own files to WAL; a file opened by you is not: run PRAGMA journal_mode = WAL once so that replicas read while one writes',
    );
  }
  return check('server', 'pass', `${facts.version}${settings === '' ? '' : `, ${settings}`}`);
}

function readOnlyCheck(facts: ServerFacts): ProbeCheck {
  if (facts.readOnly === undefined) return check('read-only', 'pass', 'the server accepts writes');
  return check(
    'read-only',
    'fail',
    `this database is read-only: ${facts.readOnly}; every acquire fails and no job runs`,
    'point the guard at the primary (after a failover: at the promoted server, through DNS, a proxy or PgBouncer)',
  );
}

function autocommitCheck(facts: ServerFacts): ProbeCheck {
  if (facts.insideTransaction === undefined) return check('autocommit', 'pass', 'could not be read here (assumed autocommit)');
  if (!facts.insideTransaction) return check('autocommit', 'pass', "the guard's statements commit one by one");
  return check(
    'autocommit',
    'fail',
    "the guard's statements run inside a transaction that outlives them: other replicas do not see its lock rows until it commits, and PostgreSQL's now() stands still",
    'give the guard a pool or URL of its own, never a transaction or a connection with autocommit off',
  );
}

function poolingCheck(facts: ServerFacts): ProbeCheck {
  if (facts.transactionPooling === undefined) {
    return check(
      'transaction-pooling',
      'pass',
      'not tested: the guard has no pg Pool of its own to test with (a Kysely instance was passed)',
    );
  }
  if (!facts.transactionPooling)
    return check('transaction-pooling', 'pass', 'each connection keeps its server session (direct, or session pooling)');
  return check(
    'transaction-pooling',
    'warn',
    'a pooler hands each transaction a different server session (PgBouncer in transaction mode): the guard detects it and uses no named prepared statement, session lock or LISTEN; "run now" requests are polled',
    'nothing to set; for triggers within a second, or shutdown cancels, give the guard a session-mode pool or a direct URL',
  );
}

function clusterCheck(facts: ServerFacts): ProbeCheck {
  const cluster = facts.cluster;
  if (cluster === undefined) return check('cluster', 'pass', 'a single server');
  const where = `${cluster.members} member(s): ${cluster.detail}`;
  if (!cluster.ready) {
    return check(
      'cluster',
      'fail',
      `${cluster.kind}, not ready (${where})`,
      'the node refuses statements: point the guard at a node that is ready',
    );
  }
  switch (cluster.kind) {
    case 'galera':
      return check(
        'cluster',
        'warn',
        `MariaDB Galera (${where}): a take is exclusive through certification at commit (a conflict is a lost race); writes stall while the cluster evicts a dead node`,
        'set acquireTimeout above the eviction stall (about 6 s with default evs timeouts) and keep every node on NTP: each stamps lock rows with its own clock (--node compares them); docs/topologies.md',
      );
    case 'group-replication':
      return check(
        'cluster',
        'warn',
        `MySQL group replication (${where})`,
        'use single-primary mode and point the guard at the primary; docs/topologies.md',
      );
    default:
      return cluster.synchronous === true
        ? check('cluster', 'pass', `streaming standbys, synchronous (${where}): a failover keeps every committed lock row`)
        : check(
            'cluster',
            'warn',
            `streaming standbys, ${cluster.synchronous === false ? 'asynchronous' : 'synchronous or not (the role cannot see)'} (${where}): a failover can lose the last lock rows and history rows`,
            'a job running through a failover may be started again once; synchronous_standby_names makes the window zero; docs/topologies.md',
          );
  }
}

interface ClockReading {
  /** Database clock minus the app's, at the middle of the round trip. */
  readonly offsetMs: number;
  /** Half the round trip: the reading is good to within this. */
  readonly errorMs: number;
}

/** The database's clock against this process's, from the reading with the shortest round trip. */
async function measureClock(db: Kysely<unknown>, dialect: Dialect): Promise<ClockReading> {
  const now = sql.raw(`${dialect.reads.time(dialect.reads.now)} AS now`);
  let best: ClockReading | undefined;
  for (let i = 0; i < CLOCK_READINGS; i += 1) {
    const sent = Date.now();
    const { rows } = await sql<{ now: Date | string }>`SELECT ${now}`.execute(db);
    const received = Date.now();
    const value = rows[0]?.now;
    if (value === undefined) throw new Error('the database returned no time');
    const reading = { offsetMs: toDate(value).getTime() - (sent + received) / 2, errorMs: (received - sent) / 2 };
    if (best === undefined || reading.errorMs < best.errorMs) best = reading;
  }
  if (best === undefined) throw new Error('no clock reading');
  return best;
}

const signed = (ms: number): string => `${ms >= 0 ? '+' : '−'}${Math.abs(Math.round(ms))} ms`;

function clockCheck(clock: ClockReading): ProbeCheck {
  const finding = `the database's clock is ${signed(clock.offsetMs)} from this process's (± ${Math.ceil(clock.errorMs)} ms)`;
  if (Math.abs(clock.offsetMs) - clock.errorMs <= CLOCK_TOLERANCE_MS) return check('clock', 'pass', finding);
  return check(
    'clock',
    'warn',
    `${finding}: locks use the database's clock, but this replica's schedule fires by its own, ${signed(-clock.offsetMs)} off`,
    "sync this host's clock (NTP, chrony); until then a lockAtLeastFor above the skew keeps a job without slots from running twice",
  );
}

async function nodeClocksCheck(own: ClockReading, nodes: readonly string[]): Promise<ProbeCheck> {
  const readings: Array<{ node: string; offsetMs: number; errorMs: number }> = [{ node: 'this database', ...own }];
  for (const url of nodes) {
    const dialect = dialectOfUrl(url);
    const opened = dialect.open(url, { logger: { warn: () => undefined, error: () => undefined }, acquireTimeoutMs: 5_000 });
    try {
      readings.push({ node: redacted(url), ...(await measureClock(opened.db, dialect)) });
    } catch (error) {
      return check('node-clocks', 'fail', `${redacted(url)} did not answer: ${messageOf(error)}`, 'check the node is up and the URL right');
    } finally {
      await (opened.close ?? (() => opened.db.destroy()))();
    }
  }
  const offsets = readings.map((r) => r.offsetMs);
  const spread = Math.max(...offsets) - Math.min(...offsets);
  const error = Math.max(...readings.map((r) => r.errorMs)) * 2;
  const finding = `${readings.map((r) => `${r.node} ${signed(r.offsetMs)}`).join(', ')} from this process: ${Math.round(spread)} ms apart (± ${Math.ceil(error)} ms)`;
  if (spread - error <= CLOCK_TOLERANCE_MS) return check('node-clocks', 'pass', finding);
  return check(
    'node-clocks',
    'warn',
    `${finding}: a lock stamped by one node expires early or late by that much on another`,
    'sync the nodes\u2019 clocks (NTP, chrony); until then keep lockAtMostFor well above the longest run plus the skew',
  );
}

/** A URL without its password, for a message. */
function redacted(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
}

async function exclusivityCheck(target: ProbeTarget, contenders: number): Promise<ProbeCheck> {
  const name = `cronguard.probe.${Math.random().toString(36).slice(2, 10)}`;
  let result: ProbeRaceResult;
  try {
    result = await target.race(name, contenders);
  } finally {
    await deleteProbeLock(target, name).catch(() => undefined);
  }
  const finding = `${result.contenders} connections took one probe lock at once: ${result.winners} won`;
  const errors = result.errors.length === 0 ? '' : `; errors: ${[...new Set(result.errors)].join(' | ')}`;
  if (result.winners === 1 && result.errors.length === 0)
    return check('exclusivity', 'pass', `${finding} (the lock row was deleted after)`);
  if (result.winners > 1) {
    return check(
      'exclusivity',
      'fail',
      `${finding}${errors}: two connections both took the lock`,
      'this database does not serialise the take: do not use it for cronguard (docs/topologies.md)',
    );
  }
  return check(
    'exclusivity',
    'fail',
    `${finding}${errors}`,
    result.errors.some((e) => /does not exist|doesn't exist|no such table/i.test(e))
      ? 'run cronguard migrate first'
      : 'the takes failed: see the errors',
  );
}

/** The probe's lock row (and the replica row of its contenders), so that nothing of it stays in `locks` or `versions`. */
async function deleteProbeLock({ db, dialect, tables }: ProbeTarget, name: string): Promise<void> {
  const locks = sql.raw(quotedTable(tables, 'locks', dialect.quote));
  // The contenders' lockedBy is the probe's name (guard/probe-race.ts).
  const replicas = sql.raw(quotedTable(tables, 'replicas', dialect.quote));
  await sql`DELETE FROM ${locks} WHERE name = ${name}`.execute(db);
  await sql`DELETE FROM ${replicas} WHERE locked_by = ${name}`.execute(db).catch(() => undefined);
}
