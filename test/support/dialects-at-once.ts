import { aroundEach, describe, it, type ExpectStatic } from 'vitest';
import { withOwnCleanup } from './case-cleanup.js';
import { dialectTargets, type DialectTarget } from './dialects.js';

/** One dialect's case of a scenario that `eachDialectAtOnce` runs on every dialect at once. */
export interface DialectCase {
  readonly target: DialectTarget;
  /** The case's own `expect` (its test context's): `expect.poll` refuses the global one in a concurrent test. */
  readonly expect: ExpectStatic;
  /**
   * Resolves once every case of the scenario has called it (or ended). Call it once the case's
   * processes are up and before the window it measures: the windows then start after every
   * process of every case has started (the CPU-heavy part), and overlap only one another.
   */
  together(): Promise<void>;
}

/** Resolves `arrive()` for everyone once `count` callers have arrived; one caller arriving twice counts once. */
function barrier(count: number): (who: string) => Promise<void> {
  const arrived = new Set<string>();
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return (who) => {
    arrived.add(who);
    if (arrived.size >= count) open();
    return opened;
  };
}

/**
 * Three cases share the machine at once: twice the timeout of a test that runs alone (vitest.config.ts),
 * so that a loaded machine slows them without failing them.
 */
const CONCURRENT_CASE_TIMEOUT_MS = 120_000;

/**
 * One scenario on every dialect at the same time: a test named `scenario`, with one case per dialect
 * ('on sqlite', 'on postgres', 'on mysql'), the cases started together and the next scenario only
 * once all have ended. For scenarios that spend their time waiting on the clock (replica processes
 * ticking every second), each case on its own tables with its own processes. What a case opens
 * with `guardOn`, `migratedGuard` or `serve` is closed when that case ends (`withOwnCleanup`), not
 * when another case does.
 */
export function eachDialectAtOnce(scenario: string, run: (dialectCase: DialectCase) => Promise<void>, timeoutMs?: number): void {
  const targets = dialectTargets();
  const arrive = barrier(targets.filter((target) => target.serverUrl !== null).length);
  describe(scenario, () => {
    it.concurrent.for(targets)('on $name', { timeout: timeoutMs ?? CONCURRENT_CASE_TIMEOUT_MS }, async (target, context) => {
      if (target.serverUrl === null) context.skip(`no ${target.name} server`);
      await withOwnCleanup(async () => {
        try {
          await run({ target, expect: context.expect, together: () => arrive(target.name) });
        } finally {
          // A case that failed or never called together() must not hold the others back.
          void arrive(target.name);
        }
      });
    });
  });
}

/**
 * `describe.each(dialectTargets())` with the dialects side by side: each dialect's tests run one
 * after another as written (each on its own tables), and the three dialects at the same time, so
 * that a file whose tests mostly wait (on a slot, on lockAtLeastFor) waits once, not three times.
 * `name` may use `$name`. A dialect without a server is skipped. What a test opens with `guardOn`,
 * `migratedGuard` or `serve` is closed when that test ends, not when a test of another dialect does
 * (`withOwnCleanup`). Tests here take `expect` from their context (`async ({ expect }) => …`):
 * the global one follows whichever test vitest started last, and `expect.poll` refuses it between two.
 */
export function eachDialectSideBySide(name: string, body: (target: DialectTarget) => void): void {
  describe.each(dialectTargets())(name, { concurrent: true }, (target) => {
    aroundEach((runTest) => withOwnCleanup(runTest));
    // Sequential inside: without it the tests inherit `concurrent` and all start at once. `skip`
    // only when set: a `skip: false` the tests inherit would undo their own `it.skipIf`.
    describe.sequential('', target.serverUrl === null ? { skip: true } : {}, () => body(target));
  });
}
