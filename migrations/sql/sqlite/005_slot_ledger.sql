-- cronguard 005: the slot ledger. Each scheduled job's declared schedule (what slots it should
-- have had), and on each run the slots missed before it and whether it caught one up.
CREATE TABLE IF NOT EXISTS cronguard_jobs (
  name text NOT NULL PRIMARY KEY,
  cron_expression text NOT NULL,
  time_zone text,
  lock_at_most_for_ms integer NOT NULL,
  lock_at_least_for_ms integer NOT NULL,
  catch_up_ms integer,
  declared_by text NOT NULL,
  declared_at text NOT NULL,
  changed_at text NOT NULL
) WITHOUT ROWID;
-- SQLite has no ADD COLUMN IF NOT EXISTS: apply this file once.
ALTER TABLE cronguard_runs ADD COLUMN missed_slots integer;
ALTER TABLE cronguard_runs ADD COLUMN catch_up integer NOT NULL DEFAULT false;
-- One job's runs by slot: the ledger's range read and live detection's newest slot before one.
CREATE INDEX IF NOT EXISTS cronguard_runs_job_slot ON cronguard_runs (job_name, slot);
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('005_slot_ledger', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (name) DO NOTHING;
