import { describe, it } from 'vitest';
import { dialectTargets, type DialectTarget } from './dialects.js';

/**
 * One scenario on every dialect at the same time: a test named `scenario`, with one case per dialect
 * ('on sqlite', 'on postgres', 'on mysql'), the three started together and the next scenario only
 * once all three have ended. For scenarios that spend their time waiting on the clock (replica
 * processes ticking every second): each case has its own tables and its own processes, and since
 * the three start together, no case's processes start up (the CPU-heavy part) while another case is
 * already in the window it measures. Close guards within the case (`withGuardOn`), never with
 * `guardOn`, whose `afterEach` would close the guards of the cases still running.
 */
export function eachDialectAtOnce(scenario: string, run: (target: DialectTarget) => Promise<void>, timeoutMs?: number): void {
  describe(scenario, () => {
    it.concurrent.for(dialectTargets())('on $name', timeoutMs === undefined ? {} : { timeout: timeoutMs }, async (target, { skip }) => {
      if (target.serverUrl === null) skip(`no ${target.name} server`);
      await run(target);
    });
  });
}
