-- cronguard 001: one lock row per job name.
-- Times are UTC text 'YYYY-MM-DDTHH:MM:SS.SSSZ': fixed width, so text order is time order.
-- token identifies the execution holding the lock (NULL once released); locked_by is for humans.
-- previous_token: the token of the holder a takeover took the lock from when that one never
-- released (its run is then marked abandoned). last_slot: the newest scheduled slot that ran.
CREATE TABLE IF NOT EXISTS cronguard_locks (
  name text NOT NULL PRIMARY KEY,
  lock_until text NOT NULL,
  locked_at text NOT NULL,
  locked_by text NOT NULL,
  token text,
  previous_token text,
  last_slot text
) WITHOUT ROWID;
