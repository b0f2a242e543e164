import type { Migration } from 'kysely';
import { createLocksTable } from './001-create-locks.js';
import { createRunsTable } from './002-create-runs.js';
import { operatorControls } from './004-operator-controls.js';
import type { MigrationContext } from './context.js';

export type { MigrationContext } from './context.js';

/**
 * Every migration, in order. Forward only: a released migration never changes; a schema change is
 * a new numbered migration here and a new file in each of migrations/sql/{postgres,mysql,sqlite}.
 */
export function cronguardMigrations(context: MigrationContext): Record<string, Migration> {
  return {
    '001_create_locks': createLocksTable(context),
    '002_create_runs': createRunsTable(context),
    '004_operator_controls': operatorControls(context),
  };
}
