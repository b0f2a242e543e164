import { CompiledQuery, type Kysely } from 'kysely';
import type { ClusterFacts, ServerFacts } from '../../core/dialect.js';

// One round trip, valid on MySQL 8 and MariaDB 10.11: variables both have under these names.
// `@@autocommit = 0`: each statement opens a transaction that stays open, hiding the lock rows.
const SERVER_SQL = `SELECT VERSION() AS version, @@global.read_only AS read_only, @@autocommit AS autocommit,
  @@sql_mode AS sql_mode, @@lower_case_table_names AS lower_case_table_names, @@time_zone AS time_zone`;

// The isolation level's variable was renamed (tx_isolation: MariaDB before 11.1, MySQL 5.7;
// transaction_isolation: MySQL 8, MariaDB 11.1+); each server knows one or both.
const ISOLATION_SQL = ['SELECT @@transaction_isolation AS isolation', 'SELECT @@tx_isolation AS isolation'];

// Galera reports itself in wsrep_on (MariaDB only; MySQL answers no row); its state in status variables.
const WSREP_ON_SQL = "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'";
const WSREP_STATUS_SQL =
  "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_ready', 'wsrep_cluster_status', 'wsrep_local_state_comment')";

// MySQL group replication's members (MariaDB has no such table: the read fails, and there is none).
const GROUP_MEMBERS_SQL = `SELECT COUNT(*) AS members, SUM(MEMBER_STATE = 'ONLINE') AS online
  FROM performance_schema.replication_group_members`;

// An open transaction of this very connection: MariaDB says so in @@in_transaction; MySQL has no
// such variable, and InnoDB lists the transaction once it has read or written (PROCESS privilege).
const OWN_TRANSACTION_SQL = [
  'SELECT @@in_transaction AS open',
  'SELECT COUNT(*) AS open FROM information_schema.innodb_trx WHERE trx_mysql_thread_id = CONNECTION_ID()',
];

interface ServerRow {
  version: string;
  read_only: number | string;
  autocommit: number | string;
  sql_mode: string;
  lower_case_table_names: number | string;
  time_zone: string;
}

const rows = async <Row>(db: Kysely<unknown>, sql: string): Promise<Row[]> => (await db.executeQuery<Row>(CompiledQuery.raw(sql))).rows;
const optional = <T>(read: Promise<T>): Promise<T | undefined> => read.catch(() => undefined);

export async function inspectMysqlServer(db: Kysely<unknown>): Promise<ServerFacts> {
  const [server] = await rows<ServerRow>(db, SERVER_SQL);
  if (server === undefined) throw new Error('MySQL answered no row to the server read');
  let isolation: string | undefined;
  for (const sql of ISOLATION_SQL) {
    isolation ??= (await optional(rows<{ isolation: string }>(db, sql)))?.[0]?.isolation;
  }
  let ownTransaction: number | undefined;
  for (const sql of OWN_TRANSACTION_SQL) {
    const [row] = (await optional(rows<{ open: number | string }>(db, sql))) ?? [];
    ownTransaction ??= row === undefined ? undefined : Number(row.open);
  }
  const autocommitOff = Number(server.autocommit) === 0;
  return {
    version: `${/mariadb/i.test(server.version) ? 'MariaDB' : 'MySQL'} ${server.version}`,
    settings: {
      sql_mode: server.sql_mode,
      transaction_isolation: isolation ?? 'unknown',
      lower_case_table_names: String(server.lower_case_table_names),
      time_zone: server.time_zone,
    },
    readOnly: Number(server.read_only) === 1 ? 'the server is read-only (@@global.read_only = 1)' : undefined,
    insideTransaction: autocommitOff || (ownTransaction === undefined ? undefined : ownTransaction > 0),
    transactionPooling: undefined,
    cluster: (await galera(db)) ?? (await groupReplication(db)),
  };
}

async function galera(db: Kysely<unknown>): Promise<ClusterFacts | undefined> {
  const [on] = await rows<{ Value: string }>(db, WSREP_ON_SQL);
  if (on === undefined || on.Value.toUpperCase() !== 'ON') return undefined;
  const status = new Map(
    (await rows<{ Variable_name: string; Value: string }>(db, WSREP_STATUS_SQL)).map((row) => [row.Variable_name, row.Value]),
  );
  return {
    kind: 'galera',
    members: Number(status.get('wsrep_cluster_size') ?? 0),
    ready: status.get('wsrep_ready')?.toUpperCase() === 'ON',
    synchronous: undefined,
    detail: [...status].map(([name, value]) => `${name}=${value}`).join(', '),
  };
}

async function groupReplication(db: Kysely<unknown>): Promise<ClusterFacts | undefined> {
  const [row] = (await optional(rows<{ members: number | string; online: number | string | null }>(db, GROUP_MEMBERS_SQL))) ?? [];
  if (row === undefined || Number(row.members) === 0) return undefined;
  return {
    kind: 'group-replication',
    members: Number(row.members),
    ready: Number(row.online ?? 0) > 0,
    synchronous: undefined,
    detail: `${Number(row.online ?? 0)} of ${Number(row.members)} members ONLINE`,
  };
}
