-- cronguard 008: the `spread` option. The spread window a job's schedule declares (null without
-- one): the ledger adds the job's offset inside it to lateAfter, so a spread run is not late.
ALTER TABLE cronguard_jobs ADD COLUMN IF NOT EXISTS spread_ms bigint;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('008_spread', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
