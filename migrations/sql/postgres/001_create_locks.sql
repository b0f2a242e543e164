-- cronguard 001: one lock row per job name.
-- timestamptz holds UTC instants, so no session time zone can shift an expiry.
-- token identifies the execution holding the lock (NULL once released); locked_by is for humans.
-- previous_token: the token of the holder a takeover took the lock from when that one never
-- released (its run is then marked abandoned). last_slot: the newest scheduled slot that ran.
CREATE TABLE IF NOT EXISTS cronguard_locks (
  name varchar(255) NOT NULL PRIMARY KEY,
  lock_until timestamptz(3) NOT NULL,
  locked_at timestamptz(3) NOT NULL,
  locked_by varchar(255) NOT NULL,
  token varchar(36),
  previous_token varchar(36),
  last_slot timestamptz(3)
);
