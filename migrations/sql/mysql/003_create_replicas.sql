-- cronguard 003: one row per replica (its locked_by) with the cronguard version it runs, so that
-- `cronguard locks`, `doctor` and `versions` show which replica runs which version. A new table:
-- no statement of an older version changes. A guard writes its row itself; nothing to fill here.
CREATE TABLE IF NOT EXISTS cronguard_replicas (
  locked_by VARCHAR(255) NOT NULL PRIMARY KEY,
  version VARCHAR(255) NOT NULL,
  started_at DATETIME(3) NOT NULL,
  seen_at DATETIME(3) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- The schema version ledger (migrations 003 onwards; 001 and 002 are 0.1.0's and need no row).
-- Kysely's migration table layout, so that `guard.migrate()` after these files finds 003 done;
-- the schema version is the highest number: SELECT MAX(name) FROM cronguard_schema_migrations.
CREATE TABLE IF NOT EXISTS cronguard_schema_migrations (
  name VARCHAR(255) NOT NULL PRIMARY KEY,
  timestamp VARCHAR(255) NOT NULL
);
-- ON DUPLICATE KEY UPDATE a no-op, not INSERT IGNORE (which would swallow other errors too).
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('003_create_replicas', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
