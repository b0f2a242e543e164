-- cronguard 002: the run history, one row per guarded execution (id = the execution's token).
CREATE TABLE IF NOT EXISTS cronguard_runs (
  id text NOT NULL PRIMARY KEY,
  job_name text NOT NULL,
  slot text,
  status text NOT NULL,
  locked_by text NOT NULL,
  started_at text NOT NULL,
  finished_at text,
  duration_ms integer,
  lock_at_most_for_ms integer,
  lock_until text,
  overran integer NOT NULL DEFAULT false,
  error text
) WITHOUT ROWID;
-- The newest runs of one job (history --job, doctor), and the newest runs (history, prune).
CREATE INDEX IF NOT EXISTS cronguard_runs_job_started ON cronguard_runs (job_name, started_at, id);
CREATE INDEX IF NOT EXISTS cronguard_runs_started ON cronguard_runs (started_at, id);
