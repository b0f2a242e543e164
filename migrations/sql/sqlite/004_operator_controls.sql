-- cronguard 004: operator controls (pause, resume, run now) and their audit.
-- On the lock row, which every acquire reads anyway: paused_at not null means paused (until
-- paused_until, or until resumed when that is null); trigger_id not null is a pending "run now"
-- request, run by the one replica whose take clears it (trigger_force: even while paused).
-- SQLite has no ADD COLUMN IF NOT EXISTS: apply this file once.
ALTER TABLE cronguard_locks ADD COLUMN paused_until text;
ALTER TABLE cronguard_locks ADD COLUMN paused_reason text;
ALTER TABLE cronguard_locks ADD COLUMN paused_by text;
ALTER TABLE cronguard_locks ADD COLUMN paused_at text;
ALTER TABLE cronguard_locks ADD COLUMN trigger_id text;
ALTER TABLE cronguard_locks ADD COLUMN trigger_by text;
ALTER TABLE cronguard_locks ADD COLUMN trigger_at text;
ALTER TABLE cronguard_locks ADD COLUMN trigger_force integer;
-- Who asked for a manual run (null for a run its schedule or a call started).
ALTER TABLE cronguard_runs ADD COLUMN triggered_by text;
-- Every control change: who, what, when, why.
CREATE TABLE IF NOT EXISTS cronguard_controls (
  id text NOT NULL PRIMARY KEY,
  job_name text NOT NULL,
  action text NOT NULL,
  actor text NOT NULL,
  reason text,
  pause_until text,
  changed_at text NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS cronguard_controls_job_changed ON cronguard_controls (job_name, changed_at, id);
-- Recorded in the schema version ledger (003 created it), as guard.migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('004_operator_controls', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (name) DO NOTHING;
