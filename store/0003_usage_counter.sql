-- The budget counter: one row with the bytes the originals hold (ccr_spec §7.1), so a put
-- checks the budget without summing the whole store. Triggers keep it in step inside the same
-- transaction as every insert, update and delete, whoever writes (this engine, a purge, or
-- another Caveman tool sharing the file), so it stays exact under concurrent writers.
-- The length expressions are those of the sum they replace: LENGTH() of a BLOB is its bytes,
-- of TEXT (dependencies_json) its characters.
CREATE TABLE IF NOT EXISTS ccr_usage (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    used_bytes INTEGER NOT NULL
);

INSERT OR REPLACE INTO ccr_usage (id, used_bytes)
SELECT 1,
       (SELECT COALESCE(SUM(LENGTH(original) + COALESCE(LENGTH(metadata), 0)), 0) FROM recoveries)
     + (SELECT COALESCE(SUM(LENGTH(data) + LENGTH(dependencies_json)), 0) FROM typed_objects);

CREATE TRIGGER IF NOT EXISTS ccr_usage_recoveries_insert AFTER INSERT ON recoveries
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes + LENGTH(NEW.original) + COALESCE(LENGTH(NEW.metadata), 0)
     WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS ccr_usage_recoveries_update
AFTER UPDATE OF original, metadata ON recoveries
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes + LENGTH(NEW.original) + COALESCE(LENGTH(NEW.metadata), 0)
                      - LENGTH(OLD.original) - COALESCE(LENGTH(OLD.metadata), 0)
     WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS ccr_usage_recoveries_delete AFTER DELETE ON recoveries
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes - LENGTH(OLD.original) - COALESCE(LENGTH(OLD.metadata), 0)
     WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS ccr_usage_objects_insert AFTER INSERT ON typed_objects
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes + LENGTH(NEW.data) + LENGTH(NEW.dependencies_json)
     WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS ccr_usage_objects_update
AFTER UPDATE OF data, dependencies_json ON typed_objects
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes + LENGTH(NEW.data) + LENGTH(NEW.dependencies_json)
                      - LENGTH(OLD.data) - LENGTH(OLD.dependencies_json)
     WHERE id = 1;
END;

CREATE TRIGGER IF NOT EXISTS ccr_usage_objects_delete AFTER DELETE ON typed_objects
BEGIN
    UPDATE ccr_usage
       SET used_bytes = used_bytes - LENGTH(OLD.data) - LENGTH(OLD.dependencies_json)
     WHERE id = 1;
END;
