-- cronguard 005: the slot ledger. Each scheduled job's declared schedule (what slots it should
-- have had), and on each run the slots missed before it and whether it caught one up.
CREATE TABLE IF NOT EXISTS cronguard_jobs (
  name VARBINARY(1020) NOT NULL PRIMARY KEY,
  cron_expression VARCHAR(255) NOT NULL,
  time_zone VARCHAR(255),
  lock_at_most_for_ms BIGINT NOT NULL,
  lock_at_least_for_ms BIGINT NOT NULL,
  catch_up_ms BIGINT,
  declared_by VARCHAR(255) NOT NULL,
  declared_at DATETIME(3) NOT NULL,
  changed_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- MySQL 8.0 has no ADD COLUMN IF NOT EXISTS: on a second run of this file these two fail with
-- ER_DUP_FIELDNAME (1060), which is safe to ignore (MariaDB could say IF NOT EXISTS).
ALTER TABLE cronguard_runs ADD COLUMN missed_slots BIGINT;
ALTER TABLE cronguard_runs ADD COLUMN catch_up BOOLEAN NOT NULL DEFAULT false;
-- One job's runs by slot: the ledger's range read and live detection's newest slot before one.
CREATE INDEX cronguard_runs_job_slot ON cronguard_runs (job_name, slot);
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('005_slot_ledger', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
