-- cronguard 003: one row per replica (its locked_by) with the cronguard version it runs, so that
-- `cronguard locks`, `doctor` and `versions` show which replica runs which version. A new table:
-- no statement of an older version changes. A guard writes its row itself; nothing to fill here.
CREATE TABLE IF NOT EXISTS cronguard_replicas (
  locked_by varchar(255) NOT NULL PRIMARY KEY,
  version varchar(255) NOT NULL,
  started_at timestamptz(3) NOT NULL,
  seen_at timestamptz(3) NOT NULL
);
-- The schema version ledger (migrations 003 onwards; 001 and 002 are 0.1.0's and need no row).
-- Kysely's migration table layout, so that `guard.migrate()` after these files finds 003 done;
-- the schema version is the highest number: SELECT max(name) FROM cronguard_schema_migrations.
CREATE TABLE IF NOT EXISTS cronguard_schema_migrations (
  name varchar(255) NOT NULL PRIMARY KEY,
  timestamp varchar(255) NOT NULL
);
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('003_create_replicas', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
