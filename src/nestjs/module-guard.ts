import type { Guard } from '../guard/create-guard.js';

let moduleGuard: Guard | undefined;

/** The guard CronguardModule made, for @GuardedCron methods; undefined before the module is created. */
export function currentModuleGuard(): Guard | undefined {
  return moduleGuard;
}

/** Set by CronguardModule when it creates its guard. */
export function setModuleGuard(guard: Guard | undefined): void {
  moduleGuard = guard;
}
