import type { DatabaseIntrospector, Kysely, SchemaMetadata, TableMetadata } from 'kysely';
import type { Dialect } from '../core/dialect.js';

type FindTables = NonNullable<Dialect['findTables']>;

/**
 * Kysely's `DatabaseIntrospector` answering about this guard's own tables only (`names`, in
 * `schema`), through the dialect's targeted read, for Kysely's migrator: it asks
 * `introspection.getTables()` whether its ledger and lock tables exist, and checks only the name
 * and the schema of what it gets.
 */
class OwnTablesIntrospector implements DatabaseIntrospector {
  constructor(
    private readonly db: Kysely<unknown>,
    private readonly findTables: FindTables,
    private readonly schema: string | undefined,
    private readonly names: readonly string[],
  ) {}

  // The migrator asks whether the ledger's schema exists: one read of pg_namespace, which resolves
  // no other relation's name, so Kysely's own answer is safe.
  getSchemas(): Promise<SchemaMetadata[]> {
    return this.db.introspection.getSchemas();
  }

  getTables(): Promise<TableMetadata[]> {
    return this.findTables(this.db, this.schema, this.names);
  }

  async getMetadata(): Promise<{ tables: TableMetadata[] }> {
    return { tables: await this.getTables() };
  }
}

/**
 * `db` as Kysely's `Migrator` is given it: the same instance, whose `introspection` answers about
 * this guard's own tables (`names` in `schema`) by the dialect's `findTables`, where it has one
 * (PostgreSQL, MySQL; elsewhere `db` itself). Kysely's PostgreSQL introspector reads every schema
 * and fails when another app's DDL runs at the same instant (postgres/schema.ts says how); its
 * MySQL one reads every table of the database, seconds beside a few hundred (mysql/schema.ts).
 *
 * A Proxy, not a subclass or a dialect wrapper: the instance may be the app's own (a `Kysely` it
 * passed as `database`), built with a dialect and a driver the guard cannot reach, and Kysely
 * keeps them in a private field, so no second instance sharing its connections can be built
 * through the public API. The migrator reads `db.introspection` on the instance it is given only;
 * every other member (`schema`, `withPlugin`, `connection()`, `getExecutor()`) is the instance's
 * own, called on the instance itself (its methods read its private fields).
 */
export function withOwnTablesIntrospection(
  db: Kysely<unknown>,
  dialect: Dialect,
  schema: string | undefined,
  names: readonly string[],
): Kysely<unknown> {
  const { findTables } = dialect;
  if (findTables === undefined) return db;
  const introspector = new OwnTablesIntrospector(db, findTables.bind(dialect), schema, names);
  return new Proxy(db, {
    get(target, property) {
      if (property === 'introspection') return introspector;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
