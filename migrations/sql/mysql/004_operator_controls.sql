-- cronguard 004: operator controls (pause, resume, run now) and their audit. Valid on MySQL 8.0
-- and MariaDB 10.11 (MySQL has no ADD COLUMN IF NOT EXISTS: apply this file once).
-- On the lock row, which every acquire reads anyway: paused_at not null means paused (until
-- paused_until, or until resumed when that is null); trigger_id not null is a pending "run now"
-- request, run by the one replica whose take clears it (trigger_force: even while paused).
ALTER TABLE cronguard_locks
  ADD COLUMN paused_until DATETIME(3),
  ADD COLUMN paused_reason TEXT,
  ADD COLUMN paused_by VARCHAR(255),
  ADD COLUMN paused_at DATETIME(3),
  ADD COLUMN trigger_id CHAR(36),
  ADD COLUMN trigger_by VARCHAR(255),
  ADD COLUMN trigger_at DATETIME(3),
  ADD COLUMN trigger_force BOOLEAN;
-- Who asked for a manual run (NULL for a run its schedule or a call started).
ALTER TABLE cronguard_runs ADD COLUMN triggered_by VARCHAR(255);
-- Every control change: who, what, when, why.
CREATE TABLE IF NOT EXISTS cronguard_controls (
  id CHAR(36) NOT NULL PRIMARY KEY,
  job_name VARBINARY(1020) NOT NULL,
  action VARCHAR(16) NOT NULL,
  actor VARCHAR(255) NOT NULL,
  reason TEXT,
  pause_until DATETIME(3),
  changed_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE INDEX cronguard_controls_job_changed ON cronguard_controls (job_name, changed_at, id);
-- Recorded in the schema version ledger (003 created it), as guard.migrate() records it.
-- ON DUPLICATE KEY UPDATE a no-op, not INSERT IGNORE (which would swallow other errors too).
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('004_operator_controls', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
