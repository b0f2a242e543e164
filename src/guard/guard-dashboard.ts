import type { Administration } from '../admin/administration.js';
import {
  createDashboard,
  type DashboardHandler,
  type DashboardOptions,
  type DashboardSource,
} from '../integrations/dashboard/dashboard.js';
import { gatedSource, ReadGate } from '../integrations/dashboard/read-gate.js';
import type { GuardControls } from './guard-controls.js';

/**
 * One line of dashboard reads per guard (per administration), shared by every `guard.dashboard()`
 * handler: however many handlers and pages, DASHBOARD_CONCURRENT_READS reads at once on its pool.
 */
const gates = new WeakMap<Administration, ReadGate>();

function gateOf(admin: Administration): ReadGate {
  let gate = gates.get(admin);
  if (gate === undefined) {
    gate = new ReadGate();
    gates.set(admin, gate);
  }
  return gate;
}

/** What a guard's dashboard reads and does: its administration, and its operator controls. */
export function dashboardSource(admin: Administration, operator: GuardControls): DashboardSource {
  return {
    jobNames: (query) => admin.jobNames(query),
    recentRuns: (jobs, perJob) => admin.recentRuns(jobs, perJob),
    recentSlots: (jobs, perJob) => admin.recentSlots(jobs, perJob),
    slots: (query) => admin.slots(query),
    run: (id) => admin.run(id),
    history: (query) => admin.history(query),
    locks: (names) => admin.locks(names),
    unlock: async (job, by) => (await admin.unlock(job, { by, reason: null })) !== undefined,
    controls: {
      pause: (job, pause) => operator.pause(job, pause),
      resume: (job, resume) => operator.resume(job, resume),
      trigger: (job, trigger) => operator.trigger(job, trigger),
      audit: (job) => operator.controls(job),
    },
  };
}

/** A guard's web dashboard (`guard.dashboard()`): its errors go to the guard's logger. */
export function guardDashboard(admin: Administration, operator: GuardControls, options: DashboardOptions | undefined): DashboardHandler {
  return createDashboard(gatedSource(dashboardSource(admin, operator), gateOf(admin)), options, operator.logger);
}
