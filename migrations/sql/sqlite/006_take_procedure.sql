-- cronguard 006: the take procedure, on MySQL/MariaDB only. Nothing to create on SQLite, whose
-- statements take no round trip: the file keeps the schema version in step.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('006_take_procedure', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (name) DO NOTHING;
