-- cronguard 007: clean stops in the slot ledger. One row per guard process and job it schedules:
-- its first and last declaration, and when its shutdown stopped scheduling the job. After the
-- last declaring process stopped cleanly, the ledger expects no slot until one declares it again.
CREATE TABLE IF NOT EXISTS cronguard_declarations (
  job_name VARBINARY(1020) NOT NULL,
  instance_id CHAR(36) NOT NULL,
  locked_by VARCHAR(255) NOT NULL,
  started_at DATETIME(3) NOT NULL,
  declared_at DATETIME(3) NOT NULL,
  stopped_at DATETIME(3),
  CONSTRAINT cronguard_declarations_pkey PRIMARY KEY (job_name, instance_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('007_declarations', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
