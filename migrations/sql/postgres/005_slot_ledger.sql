-- cronguard 005: the slot ledger. Each scheduled job's declared schedule (what slots it should
-- have had), and on each run the slots missed before it and whether it caught one up.
CREATE TABLE IF NOT EXISTS cronguard_jobs (
  name varchar(255) NOT NULL PRIMARY KEY,
  cron_expression varchar(255) NOT NULL,
  time_zone varchar(255),
  lock_at_most_for_ms bigint NOT NULL,
  lock_at_least_for_ms bigint NOT NULL,
  catch_up_ms bigint,
  declared_by varchar(255) NOT NULL,
  declared_at timestamptz(3) NOT NULL,
  changed_at timestamptz(3) NOT NULL
);
ALTER TABLE cronguard_runs ADD COLUMN IF NOT EXISTS missed_slots bigint;
ALTER TABLE cronguard_runs ADD COLUMN IF NOT EXISTS catch_up boolean NOT NULL DEFAULT false;
-- One job's runs by slot: the ledger's range read and live detection's newest slot before one.
CREATE INDEX IF NOT EXISTS cronguard_runs_job_slot ON cronguard_runs (job_name, slot);
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('005_slot_ledger', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
