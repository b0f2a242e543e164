// Why a replica's take of a slot was refused 'locked', from what the replicas report: each replica
// reports its holds of the job's lock (test/fixtures/cron-replica.ts, test/fixtures/nest-app/app.ts)
// and when each refused take was sent. A refusal is explained when another slot's hold overlapped
// its take: the server decided between the send and the answer, and the lock was held from the
// holder's send to its release's answer. On a stalled machine either end may come late, which a
// fixed tolerance around the body's times did not cover.

/** One hold of the lock by a replica (epoch ms): from its take's send to its release's answer. */
export interface LockHold {
  readonly slot: string | null;
  readonly from: number;
  readonly until: number;
}

/** A refusal as the fixtures report it: `asked` when its take was sent (null: unknown), `at` when it came back. */
export interface ReportedRefusal {
  readonly slot: string | null;
  readonly reason: string;
  readonly asked: number | null;
  readonly at: number;
}

/** Whether a 'locked' refusal came while another slot's run held the lock. */
export function lockedByAHold(refusal: ReportedRefusal, holds: readonly LockHold[]): boolean {
  const sent = refusal.asked ?? refusal.at;
  return refusal.reason === 'locked' && holds.some((hold) => hold.slot !== refusal.slot && hold.from <= refusal.at && hold.until >= sent);
}
