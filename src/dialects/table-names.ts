import { describeValue } from '../core/errors.js';
import type { Dialect, TableNames } from '../core/dialect.js';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Leaves room for the longest suffix under PostgreSQL's 63-byte identifiers. */
const MAX_PREFIX_LENGTH = 40;

export const DEFAULT_TABLE_PREFIX = 'cronguard_';

/** Table names from a `tablePrefix`, or a `TypeError` when it is not an identifier. */
export function resolveTableNames(prefix: unknown, dialect: Dialect): TableNames {
  if (typeof prefix === 'string') {
    const parts = prefix.split('.');
    const [first, second] = parts;
    const valid = (part: string | undefined): part is string =>
      part !== undefined && IDENTIFIER.test(part) && part.length <= MAX_PREFIX_LENGTH;
    if (parts.length === 1 && valid(first)) return namesFor(undefined, first);
    if (parts.length === 2 && dialect.supportsSchemas && valid(first) && valid(second)) {
      return namesFor(first, second);
    }
  }
  const schemaNote = dialect.supportsSchemas ? ' (or `schema.prefix`)' : ` (schema-qualified prefixes are PostgreSQL only)`;
  throw new TypeError(
    `Expected \`tablePrefix\` to be an identifier like 'cronguard_'${schemaNote} of at most ${MAX_PREFIX_LENGTH} characters, ` +
      `got ${describeValue(prefix)}`,
  );
}

function namesFor(schema: string | undefined, prefix: string): TableNames {
  return {
    schema,
    locks: `${prefix}locks`,
    runs: `${prefix}runs`,
    controls: `${prefix}controls`,
    jobs: `${prefix}jobs`,
    declarations: `${prefix}declarations`,
    migrations: `${prefix}migrations`,
    migrationLock: `${prefix}migrations_lock`,
    schemaMigrations: `${prefix}schema_migrations`,
    schemaMigrationLock: `${prefix}schema_migrations_lock`,
    replicas: `${prefix}replicas`,
    migrationLease: `${prefix}migration_lease`,
  };
}
