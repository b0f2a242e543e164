import type { Guard } from '../guard/create-guard.js';
import type { CommandOutput } from './commands.js';

/**
 * `cronguard migrate`: what it applied (or that the tables were already up to date), and, for a
 * routine it could not create (MySQL's take procedure without CREATE ROUTINE), that it was NOT
 * created, what that costs and the GRANT that mends it. Exit 0 either way: the tables are usable.
 */
export async function migrateCommand(guard: Guard, database: string): Promise<CommandOutput> {
  const report = await guard.migrate();
  // A database migrated by a newer cronguard stays ahead: migrations only go forward.
  const ahead = report.database > report.code ? `, ahead of this cronguard's ${report.code}: a newer version migrated it` : '';
  const version = `schema version ${report.database}${ahead}`;
  const lines = [
    report.applied.length === 0
      ? `cronguard: tables already up to date (${version}); nothing applied`
      : `cronguard: applied ${report.applied.join(', ')} (${version})`,
    ...report.skippedRoutines.map((routine) => skippedRoutineLine(routine, database)),
  ];
  return { text: `${lines.join('\n')}\n`, json: { migrated: true, schema: report }, exitCode: 0 };
}

/** What a left-out take procedure costs, and the GRANT for the URL's user and database. */
function skippedRoutineLine(routine: string, database: string): string {
  const { user, schema } = accountOf(database);
  return (
    `cronguard: the stored procedure ${routine} was NOT created: this database user lacks the CREATE ROUTINE privilege. ` +
    'Everything works without it, but each replica takes a batch of locks in four statements instead of one call ' +
    '(slower ticks when many jobs fire together; no run is doubled). To create it, run ' +
    `GRANT CREATE ROUTINE ON \`${schema}\`.* TO '${user}'@'%'; (the account's host as SHOW GRANTS shows it), ` +
    'then cronguard migrate again (or run cronguard migrate once as a user who has the privilege).'
  );
}

function accountOf(database: string): { user: string; schema: string } {
  try {
    const url = new URL(database);
    return { user: decodeURIComponent(url.username) || '<user>', schema: decodeURIComponent(url.pathname.slice(1)) || '<database>' };
  } catch {
    return { user: '<user>', schema: '<database>' };
  }
}
