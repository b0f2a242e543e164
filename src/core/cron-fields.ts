import { validateDetailed } from 'node-cron';
import { describeValue } from './errors.js';

/** A field of a cron expression: its name in messages and the values node-cron reads in it. */
interface CronField {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** Names node-cron reads in the field (month and weekday names), each standing for its number. */
  readonly names?: readonly string[];
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** The six fields node-cron reads, a five-field expression being one without the seconds. */
const FIELDS: readonly CronField[] = [
  { name: 'second', min: 0, max: 59 },
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: MONTHS },
  // 7 is Sunday too, as in most crons.
  { name: 'weekday', min: 0, max: 7, names: WEEKDAYS },
];

/** node-cron's own words for a field, in its "25 is a invalid expression for hour". */
const NODE_CRON_FIELDS: Readonly<Record<string, string>> = {
  second: 'second',
  minute: 'minute',
  hour: 'hour',
  dayOfMonth: 'day of month',
  month: 'month',
  dayOfWeek: 'weekday',
};

/** A value of a field: a number, or a month or weekday name (full or short) read as its number. */
function valueOf(text: string, field: CronField): number | undefined {
  if (/^\d+$/.test(text)) return Number(text);
  const index = field.names?.findIndex((name) => text.toLowerCase().startsWith(name)) ?? -1;
  if (index < 0) return undefined;
  return field.name === 'month' ? index + 1 : index;
}

/**
 * What is wrong with one comma-separated item of a field, in our words: a value outside the
 * field's range, or a step that never reaches a second value (`*\/61` in the seconds fires only at
 * 0, which node-cron accepts silently). Undefined when the item is right, or of a form left to
 * node-cron (L, W, #, ?).
 */
function itemProblem(item: string, field: CronField): string | undefined {
  const form = /^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:\/(\d+))?$/i.exec(item);
  if (form === null) return undefined;
  const [, range = '', stepText] = form;
  const bounds = range === '*' ? [String(field.min), String(field.max)] : range.split('-');
  const values = bounds.map((bound) => valueOf(bound, field));
  if (values.some((value) => value === undefined)) return undefined;
  const outside = values.find((value) => value !== undefined && (value < field.min || value > field.max));
  if (outside !== undefined) return `${outside} is outside the ${field.name} field's ${field.min}-${field.max}`;
  if (stepText === undefined) return undefined;
  const step = Number(stepText);
  // Up to the field's count of values: `*/60` in the minutes (only :00) is a common way to write
  // "hourly" that node-cron and Vixie cron accept, and an app upgrading must keep starting. Past it,
  // a step is a typo (`*/61` in the seconds, `*/25` in the hours).
  const count = field.max - field.min + 1;
  if (step < 1 || step > count) {
    return `the step ${step} of "${item}" in the ${field.name} field must be from 1 to ${count} (a larger one fires only at its first value)`;
  }
  return undefined;
}

/**
 * What is wrong with a cron expression, in cronguard's words, or undefined when node-cron reads it
 * as meant: the number of fields, a value out of its field's range, a step that cannot repeat, or
 * node-cron's own refusal, reworded.
 */
export function cronExpressionProblem(expression: string): string | undefined {
  const trimmed = expression.trim();
  if (trimmed.startsWith('@')) {
    const validation = validateDetailed(trimmed);
    return validation.valid ? undefined : `${JSON.stringify(trimmed)} is not one of @yearly, @monthly, @weekly, @daily, @hourly`;
  }
  const parts = trimmed.split(/\s+/);
  if (parts.length !== 5 && parts.length !== 6) {
    return `it has ${parts.length} field${parts.length === 1 ? '' : 's'}; a cron expression has 5 (minute hour day-of-month month weekday) or 6 (seconds first)`;
  }
  const fields = parts.length === 6 ? FIELDS : FIELDS.slice(1);
  for (const [index, part] of parts.entries()) {
    const field = fields[index];
    if (field === undefined) continue;
    for (const item of part.split(',')) {
      const problem = itemProblem(item, field);
      if (problem !== undefined) return problem;
    }
  }
  const validation = validateDetailed(trimmed);
  if (validation.valid) return undefined;
  const [first] = validation.errors;
  if (first?.message.includes('impossible day of month') === true) {
    return `the day of month ${JSON.stringify(parts.at(-3))} never comes in the month ${JSON.stringify(parts.at(-2))}`;
  }
  const field = first === undefined ? undefined : NODE_CRON_FIELDS[first.field];
  if (first === undefined || field === undefined) return first?.message ?? 'node-cron does not read it';
  return `the ${field} field ${JSON.stringify(first.value ?? '')} is not a value, range, list or step node-cron reads`;
}

/**
 * Throws a `TypeError` naming the option, the job and the value when `expression` is not a cron
 * expression node-cron reads as meant. `option` is how the message names it (`` `cron` ``, or
 * "the schedule" of `guard.schedule`).
 */
export function assertCronExpression(expression: unknown, option: string, job: string): asserts expression is string {
  const problem = typeof expression === 'string' ? cronExpressionProblem(expression) : 'it is not a string';
  if (problem === undefined) return;
  throw new TypeError(
    `Expected ${option} of job ${JSON.stringify(job)} to be a cron expression like '0 * * * *' or '*/10 * * * * *', ` +
      `got ${describeValue(expression)}: ${problem}`,
  );
}
