-- cronguard 008: the `spread` option. The spread window a job's schedule declares (null without
-- one): the ledger adds the job's offset inside it to lateAfter, so a spread run is not late.
-- MySQL 8.0 has no ADD COLUMN IF NOT EXISTS: on a second run of this file this fails with
-- ER_DUP_FIELDNAME (1060), which is safe to ignore (MariaDB could say IF NOT EXISTS).
ALTER TABLE cronguard_jobs ADD COLUMN spread_ms BIGINT;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('008_spread', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
