-- cronguard 007: clean stops in the slot ledger. One row per guard process and job it schedules:
-- its first and last declaration, and when its shutdown stopped scheduling the job. After the
-- last declaring process stopped cleanly, the ledger expects no slot until one declares it again.
CREATE TABLE IF NOT EXISTS cronguard_declarations (
  job_name varchar(255) NOT NULL,
  instance_id varchar(36) NOT NULL,
  locked_by varchar(255) NOT NULL,
  started_at timestamptz(3) NOT NULL,
  declared_at timestamptz(3) NOT NULL,
  stopped_at timestamptz(3),
  CONSTRAINT cronguard_declarations_pkey PRIMARY KEY (job_name, instance_id)
);
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('007_declarations', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
