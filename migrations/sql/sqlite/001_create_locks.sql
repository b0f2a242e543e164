-- cronguard 001: one lock row per job name.
-- Times are UTC text 'YYYY-MM-DDTHH:MM:SS.SSSZ': fixed width, so text order is time order.
-- token identifies the execution holding the lock (NULL once released); locked_by is for humans.
CREATE TABLE IF NOT EXISTS cronguard_locks (
  name text NOT NULL PRIMARY KEY,
  lock_until text NOT NULL,
  locked_at text NOT NULL,
  locked_by text NOT NULL,
  token text
) WITHOUT ROWID;
