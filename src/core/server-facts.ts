/**
 * What a dialect reads about the server a guard is given, for `guard.probe()` (admin/probe.ts):
 * facts only; the probe decides what each means for the guard's promises.
 */
export interface ServerFacts {
  /** The server and its version, e.g. "PostgreSQL 16.4", "MariaDB 10.11.6", "SQLite 3.46.1". */
  readonly version: string;
  /** Settings the guard's statements depend on, as the server reports them (isolation, sql_mode, journal mode). */
  readonly settings: Readonly<Record<string, string>>;
  /** Why the server refuses writes (a standby in recovery, `read_only`), or undefined when it accepts them. */
  readonly readOnly: string | undefined;
  /**
   * Whether the guard's statements run inside a transaction that outlives them (a Kysely
   * transaction passed as `database`, a connection with autocommit off): their lock rows are then
   * invisible to the other replicas until that transaction ends, and PostgreSQL's `now()` stands
   * still. Undefined where it cannot be read.
   */
  readonly insideTransaction: boolean | undefined;
  /**
   * Whether the connections go through a pooler that hands each transaction a different server
   * session (PgBouncer in transaction mode). Undefined where the dialect cannot tell (no pool of
   * the driver's to test with) or has no such poolers.
   */
  readonly transactionPooling: boolean | undefined;
  /** The replication or cluster the server is part of, when it says so. */
  readonly cluster: ClusterFacts | undefined;
}

export interface ClusterFacts {
  /**
   * `galera`: MariaDB Galera (multi-primary, certification at commit); `group-replication`: MySQL
   * group replication; `streaming-standbys`: a PostgreSQL primary with standbys attached.
   */
  readonly kind: 'galera' | 'group-replication' | 'streaming-standbys';
  /** Nodes (or standbys) the server counts. */
  readonly members: number;
  /** Whether the node accepts the guard's statements now (Galera's `wsrep_ready`). */
  readonly ready: boolean;
  /** PostgreSQL: whether every standby confirms commits synchronously; undefined elsewhere or unknown. */
  readonly synchronous: boolean | undefined;
  /** The server's own words: status variables, replication states. */
  readonly detail: string;
}
