// The documented error codes: each constant's value is its own name (so comparing with the string
// and with the constant are the same), and the codes a guard throws are among them.
import { describe, expect, it } from 'vitest';
import { GuardError, GuardErrorCodes, createGuard } from '../src/index.js';
import { databaseUrl, dialectTargets } from './support/dialects.js';

describe('GuardErrorCodes', () => {
  it('maps every code to itself', () => {
    const entries = Object.entries(GuardErrorCodes);
    expect(entries.length).toBeGreaterThan(10);
    for (const [key, value] of entries) expect(value).toBe(key);
  });

  it('holds the code a closed guard rejects with', async () => {
    const sqlite = dialectTargets().find((target) => target.name === 'sqlite');
    if (sqlite === undefined) throw new Error('no sqlite target');
    const guard = createGuard({ database: databaseUrl(sqlite) });
    await guard.close();
    const error = await guard.locks().then(
      () => undefined,
      (rejected: unknown) => rejected,
    );
    expect(error).toBeInstanceOf(GuardError);
    expect((error as GuardError).code).toBe(GuardErrorCodes.GUARD_CLOSED);
  });
});
