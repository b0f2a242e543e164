-- cronguard 008: the `spread` option. The spread window a job's schedule declares (null without
-- one): the ledger adds the job's offset inside it to lateAfter, so a spread run is not late.
-- SQLite has no ADD COLUMN IF NOT EXISTS: apply this file once.
ALTER TABLE cronguard_jobs ADD COLUMN spread_ms integer;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('008_spread', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (name) DO NOTHING;
