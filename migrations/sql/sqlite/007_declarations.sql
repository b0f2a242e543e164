-- cronguard 007: clean stops in the slot ledger. One row per guard process and job it schedules:
-- its first and last declaration, and when its shutdown stopped scheduling the job. After the
-- last declaring process stopped cleanly, the ledger expects no slot until one declares it again.
CREATE TABLE IF NOT EXISTS cronguard_declarations (
  job_name text NOT NULL,
  instance_id text NOT NULL,
  locked_by text NOT NULL,
  started_at text NOT NULL,
  declared_at text NOT NULL,
  stopped_at text,
  CONSTRAINT cronguard_declarations_pkey PRIMARY KEY (job_name, instance_id)
) WITHOUT ROWID;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('007_declarations', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (name) DO NOTHING;
