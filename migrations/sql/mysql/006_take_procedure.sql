-- cronguard 006: the take procedure. A batch of acquires whose lock rows exist takes its locks and
-- starts its runs in one CALL instead of four round trips (src/dialects/mysql/schema.ts
-- says why each statement has its shape). Needs MySQL 8.0 or MariaDB 10.6+ (JSON_TABLE) and the
-- CREATE ROUTINE privilege; the replicas call it with EXECUTE (SQL SECURITY INVOKER: on their own
-- privileges on the tables). Its body holds semicolons, so the file sets the mysql/mariadb client's
-- delimiter around it (`DELIMITER //` ... `//` then `DELIMITER ;`): `mariadb db < 006_take_procedure.sql`
-- applies it as it is. DELIMITER is a command of those clients (Flyway reads it too), not SQL: a
-- tool that sends the file to the server as it is (a driver's multi-statement query) must drop the
-- two DELIMITER lines and end the CREATE PROCEDURE with `END;` (see migrations/sql/README.md).
-- Its name is <prefix>take_locks_v1_<the first 8 hex digits of the SHA-256 of the exact prefix>
-- (routine names ignore case, table names do not): if you set `tablePrefix`, name it after
-- SELECT CONCAT('myapp_', 'take_locks_v1_', LEFT(SHA2('myapp_', 256), 8)).
DELIMITER //
CREATE PROCEDURE `cronguard_take_locks_v1_e10dce7a`(
  IN requests LONGTEXT CHARACTER SET utf8mb4, IN locked_by_value VARCHAR(255) CHARACTER SET utf8mb4, IN with_history BOOLEAN)
  MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
  DECLARE done BOOLEAN DEFAULT FALSE;
  DECLARE v_name VARBINARY(1020);
  DECLARE v_token VARBINARY(36);
  DECLARE v_slot DATETIME(3);
  DECLARE v_micros BIGINT;
  DECLARE wanted CURSOR FOR
    SELECT j.name, j.token, j.slot, j.micros
      FROM JSON_TABLE(requests, '$[*]' COLUMNS (i FOR ORDINALITY, name VARBINARY(1020) PATH '$.n', token VARBINARY(36) PATH '$.t',
      slot DATETIME(3) PATH '$.s', micros BIGINT PATH '$.u', ms BIGINT PATH '$.m')) AS j
     ORDER BY j.name;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = TRUE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  START TRANSACTION;
  OPEN wanted;
  takes: LOOP
    FETCH wanted INTO v_name, v_token, v_slot, v_micros;
    IF done THEN LEAVE takes; END IF;
    UPDATE `cronguard_locks`
       SET previous_token = token, lock_until = UTC_TIMESTAMP(3) + INTERVAL v_micros MICROSECOND,
           locked_at = UTC_TIMESTAMP(3), locked_by = locked_by_value, token = v_token, last_slot = COALESCE(v_slot, last_slot)
     WHERE name = v_name AND lock_until <= UTC_TIMESTAMP(3) AND (paused_at IS NULL OR paused_until <= UTC_TIMESTAMP(3))
       AND (v_slot IS NULL OR last_slot IS NULL OR last_slot < v_slot);
  END LOOP;
  CLOSE wanted;
  IF with_history THEN
    INSERT INTO `cronguard_runs` (id, job_name, slot, status, locked_by, started_at, lock_at_most_for_ms, lock_until)
    SELECT l.token, l.name, j.slot, 'running', l.locked_by, l.locked_at, j.ms, l.lock_until
      FROM JSON_TABLE(requests, '$[*]' COLUMNS (i FOR ORDINALITY, name VARBINARY(1020) PATH '$.n', token VARBINARY(36) PATH '$.t',
      slot DATETIME(3) PATH '$.s', micros BIGINT PATH '$.u', ms BIGINT PATH '$.m')) AS j
      STRAIGHT_JOIN `cronguard_locks` l FORCE INDEX (PRIMARY) ON l.name = j.name AND l.token = j.token
    UNION ALL
    SELECT r.id, r.job_name, r.slot, r.status, r.locked_by, r.started_at, r.lock_at_most_for_ms, r.lock_until
      FROM JSON_TABLE(requests, '$[*]' COLUMNS (i FOR ORDINALITY, name VARBINARY(1020) PATH '$.n', token VARBINARY(36) PATH '$.t',
      slot DATETIME(3) PATH '$.s', micros BIGINT PATH '$.u', ms BIGINT PATH '$.m')) AS j
      STRAIGHT_JOIN `cronguard_locks` l FORCE INDEX (PRIMARY) ON l.name = j.name AND l.token = j.token
      STRAIGHT_JOIN `cronguard_runs` r FORCE INDEX (PRIMARY) ON r.id = l.previous_token
     WHERE r.status = 'running'
    ON DUPLICATE KEY UPDATE status = 'abandoned';
  END IF;
  SELECT j.i, CASE WHEN l.name IS NULL THEN 'missing' WHEN l.token = j.token THEN 'mine'
              WHEN l.paused_at IS NOT NULL AND (l.paused_until IS NULL OR l.paused_until > UTC_TIMESTAMP(3)) THEN 'paused'
              WHEN l.last_slot >= j.slot THEN 'slot-done' WHEN l.lock_until > UTC_TIMESTAMP(3) THEN 'locked' ELSE 'free' END AS state
    FROM JSON_TABLE(requests, '$[*]' COLUMNS (i FOR ORDINALITY, name VARBINARY(1020) PATH '$.n', token VARBINARY(36) PATH '$.t',
      slot DATETIME(3) PATH '$.s', micros BIGINT PATH '$.u', ms BIGINT PATH '$.m')) AS j
    LEFT JOIN `cronguard_locks` l ON l.name = j.name;
  COMMIT;
END //
DELIMITER ;
-- Recorded in the ledger of migrations 003 onwards, as migrate() records it.
INSERT INTO cronguard_schema_migrations (name, timestamp)
VALUES ('006_take_procedure', DATE_FORMAT(UTC_TIMESTAMP(3), '%Y-%m-%dT%H:%i:%s.%fZ'))
ON DUPLICATE KEY UPDATE name = name;
