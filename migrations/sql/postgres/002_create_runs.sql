-- cronguard 002: the run history, one row per guarded execution (id = the execution's token).
CREATE TABLE IF NOT EXISTS cronguard_runs (
  id varchar(36) NOT NULL PRIMARY KEY,
  job_name varchar(255) NOT NULL,
  slot timestamptz(3),
  status varchar(16) NOT NULL,
  locked_by varchar(255) NOT NULL,
  started_at timestamptz(3) NOT NULL,
  finished_at timestamptz(3),
  duration_ms bigint,
  lock_at_most_for_ms bigint,
  lock_until timestamptz(3),
  overran boolean NOT NULL DEFAULT false,
  error text
);
-- The newest runs of one job (history --job, doctor), and the newest runs (history, prune).
CREATE INDEX IF NOT EXISTS cronguard_runs_job_started ON cronguard_runs (job_name, started_at, id);
CREATE INDEX IF NOT EXISTS cronguard_runs_started ON cronguard_runs (started_at, id);
