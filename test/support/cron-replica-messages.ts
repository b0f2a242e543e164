/** What test/fixtures/cron-replica.ts sends its parent. */
export type ReplicaMessage =
  | { type: 'ready'; pid: number }
  | { type: 'started'; pid: number; slot: string; start: number }
  | { type: 'ran'; pid: number; slot: string; start: number; end: number }
  | { type: 'held'; pid: number; slot: string | null; from: number; until: number }
  | { type: 'skipped'; pid: number; slot: string | null; reason: string; error: string | null; asked: number | null; at: number }
  | { type: 'exiting'; pid: number };
