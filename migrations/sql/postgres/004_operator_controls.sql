-- cronguard 004: operator controls (pause, resume, run now) and their audit.
-- On the lock row, which every acquire reads anyway: paused_at not null means paused (until
-- paused_until, or until resumed when that is null); trigger_id not null is a pending "run now"
-- request, run by the one replica whose take clears it (trigger_force: even while paused).
ALTER TABLE cronguard_locks
  ADD COLUMN IF NOT EXISTS paused_until timestamptz(3),
  ADD COLUMN IF NOT EXISTS paused_reason text,
  ADD COLUMN IF NOT EXISTS paused_by varchar(255),
  ADD COLUMN IF NOT EXISTS paused_at timestamptz(3),
  ADD COLUMN IF NOT EXISTS trigger_id varchar(36),
  ADD COLUMN IF NOT EXISTS trigger_by varchar(255),
  ADD COLUMN IF NOT EXISTS trigger_at timestamptz(3),
  ADD COLUMN IF NOT EXISTS trigger_force boolean;
-- Who asked for a manual run (null for a run its schedule or a call started).
ALTER TABLE cronguard_runs ADD COLUMN IF NOT EXISTS triggered_by varchar(255);
-- Every control change: who, what, when, why.
CREATE TABLE IF NOT EXISTS cronguard_controls (
  id varchar(36) NOT NULL PRIMARY KEY,
  job_name varchar(255) NOT NULL,
  action varchar(16) NOT NULL,
  actor varchar(255) NOT NULL,
  reason text,
  pause_until timestamptz(3),
  changed_at timestamptz(3) NOT NULL
);
CREATE INDEX IF NOT EXISTS cronguard_controls_job_changed ON cronguard_controls (job_name, changed_at, id);
-- Recorded in the schema version ledger (003 created it), as guard.migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('004_operator_controls', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
