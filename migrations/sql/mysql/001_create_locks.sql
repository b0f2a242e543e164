-- cronguard 001: one lock row per job name. Valid on MySQL 8.0 and MariaDB 10.11.
-- name is VARBINARY so that names compare byte-exact (the _bin collations ignore trailing spaces);
-- read it with CONVERT(name USING utf8mb4). Times are DATETIME(3) in UTC, written from
-- UTC_TIMESTAMP(3); never TIMESTAMP, which is read in the session's zone and jumps at DST.
-- token identifies the execution holding the lock (NULL once released); locked_by is for humans.
-- previous_token: the token of the holder a takeover took the lock from when that one never
-- released (its run is then marked abandoned). last_slot: the newest scheduled slot that ran.
CREATE TABLE IF NOT EXISTS cronguard_locks (
  name VARBINARY(1020) NOT NULL PRIMARY KEY,
  lock_until DATETIME(3) NOT NULL,
  locked_at DATETIME(3) NOT NULL,
  locked_by VARCHAR(255) NOT NULL,
  token CHAR(36),
  previous_token CHAR(36),
  last_slot DATETIME(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
