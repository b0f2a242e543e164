import { CompiledQuery } from 'kysely';
import { namedStatement, type NamedStatement } from '../common/named-parameters.js';

// What every SQLite lock statement's text is built from (lock-store.ts, batch-acquire.ts,
// batch-release.ts): the clock reading, durations as date modifiers, named parameters.

/** UTC with milliseconds and a fixed width, so that text order is time order. */
export const NOW = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

/** A SQLite date modifier adding a duration: '+1.5 seconds'. */
export function plusSeconds(ms: number): string {
  return `+${ms / 1_000} seconds`;
}

/** A statement with `:name` parameters, sent with `?` marks (laid out once, when the store is built). */
export function statement<Values extends object>(text: string): NamedStatement<Values> {
  return namedStatement<Values>(text, 'positional');
}

/** One call of a statement, with its values in the statement's order. */
export function call<Values extends object>(named: NamedStatement<Values>, values: Values): CompiledQuery {
  return CompiledQuery.raw(named.sql, named.parameters(values));
}
