// A take that other sessions keep rolling back is a lost race (Galera's certification conflicts).

/** ER_LOCK_DEADLOCK */
const DEADLOCK = 1213;

/** ER_LOCK_DEADLOCK: InnoDB chose the statement's transaction as a deadlock victim, or (Galera) it failed certification. */
export function isDeadlock(error: unknown): boolean {
  return (error as { errno?: unknown }).errno === DEADLOCK;
}

/**
 * A take's result, or undefined when it still failed with a deadlock error after its attempts
 * (`againIfDeadlocked`): a lost race, never an error. The take was rolled back (it took nothing),
 * and only other sessions writing the same lock row at that instant make it a victim again and
 * again: on Galera every node takes a free row locally, the cluster's certification lets the
 * first COMMIT through and fails the others' (error 1213), and a loser's next attempt fails again
 * while its node has not yet applied the winner's write. The caller answers it like a take that
 * matched nothing: the row is someone else's.
 */
export async function unlessConflicted<Result>(taking: Promise<Result>): Promise<Result | undefined> {
  try {
    return await taking;
  } catch (error) {
    if (isDeadlock(error)) return undefined;
    throw error;
  }
}
