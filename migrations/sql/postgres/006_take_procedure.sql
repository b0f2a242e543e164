-- cronguard 006: the take procedure, on MySQL/MariaDB only. Nothing to create on PostgreSQL, whose
-- batch of acquires already is one statement: the file keeps the schema version in step.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('006_take_procedure', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
ON CONFLICT (name) DO NOTHING;
