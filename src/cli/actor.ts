import { hostname, userInfo } from 'node:os';

/** Who the CLI records as having made a change, without --by: the user on this host. */
export function defaultActor(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    // No user entry (a container running under an unnamed uid).
    return `cli@${hostname()}`;
  }
}
