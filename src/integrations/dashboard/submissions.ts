import { randomBytes } from 'node:crypto';

/** The form field of a control form's submission key. */
export const SUBMISSION_FIELD = 'submission';
/** How long a submission's outcome is remembered: a double click, a resend after a slow answer. */
const REMEMBER_MS = 10 * 60_000;
/** The most submissions remembered; the oldest are forgotten first. */
const MAX_REMEMBERED = 10_000;

/** A new submission key for one rendering of a form. */
export function newSubmissionKey(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * The control forms' idempotency: each rendered form carries a random key, and the same key
 * submitted again (a double click on "Run now", a browser resending the POST) gets the first
 * submission's outcome without changing anything again. In memory, per dashboard: across
 * dashboards, `guard.trigger()` returning a pending trigger keeps a double submit to one run.
 */
export class Submissions {
  readonly #outcomes = new Map<string, { at: number; outcome: Promise<string> }>();

  /**
   * The outcome of the submission `key` of `scope` (the control and the job): `apply()`'s, run once.
   * A failed one is forgotten, so that submitting the form again retries it. No key: run as is.
   */
  once(key: string | null, scope: string, apply: () => Promise<string>): Promise<string> {
    if (key === null || !/^[\w-]{22}$/.test(key)) return apply();
    const id = `${scope}\0${key}`;
    const now = performance.now();
    for (const [other, entry] of this.#outcomes) {
      if (now - entry.at < REMEMBER_MS && this.#outcomes.size <= MAX_REMEMBERED) break;
      this.#outcomes.delete(other);
    }
    const known = this.#outcomes.get(id);
    if (known !== undefined) return known.outcome;
    const outcome = apply();
    this.#outcomes.set(id, { at: now, outcome });
    outcome.catch(() => this.#outcomes.delete(id));
    return outcome;
  }
}
