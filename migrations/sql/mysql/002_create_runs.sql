-- cronguard 002: the run history, one row per guarded execution (id = the execution's token).
CREATE TABLE IF NOT EXISTS cronguard_runs (
  id CHAR(36) NOT NULL PRIMARY KEY,
  job_name VARBINARY(1020) NOT NULL,
  slot DATETIME(3),
  status VARCHAR(16) NOT NULL,
  locked_by VARCHAR(255) NOT NULL,
  started_at DATETIME(3) NOT NULL,
  finished_at DATETIME(3),
  duration_ms BIGINT,
  lock_at_most_for_ms BIGINT,
  lock_until DATETIME(3),
  overran BOOLEAN NOT NULL DEFAULT false,
  error TEXT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- The newest runs of one job (history --job, doctor), and the newest runs (history, prune).
-- MySQL 8.0 has no CREATE INDEX IF NOT EXISTS: on a second run of this file these two fail with
-- ER_DUP_KEYNAME (1061), which is safe to ignore (MariaDB could say IF NOT EXISTS).
CREATE INDEX cronguard_runs_job_started ON cronguard_runs (job_name, started_at, id);
CREATE INDEX cronguard_runs_started ON cronguard_runs (started_at, id);
