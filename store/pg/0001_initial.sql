-- The recovery store on PostgreSQL: the same tables and columns as the SQLite store
-- (store/0001_initial.sql + store/0002_recoveries_metadata.sql, ccr_spec §3), with BYTEA for
-- the originals (byte-exact) and BIGINT for the counters. Applied once, under a
-- transaction-level advisory lock, and recorded in ccr_schema_migrations (see store_pg.py).
CREATE TABLE IF NOT EXISTS recoveries (
    handle TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    content_type TEXT NOT NULL,
    compressor TEXT NOT NULL,
    tokens_before BIGINT NOT NULL,
    tokens_after BIGINT NOT NULL,
    original BYTEA NOT NULL,
    metadata BYTEA
);

CREATE TABLE IF NOT EXISTS typed_objects (
    object_id TEXT PRIMARY KEY,
    object_type TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    repository_state TEXT NOT NULL,
    session_id TEXT NOT NULL,
    transform_version TEXT NOT NULL,
    currentness TEXT NOT NULL,
    lifecycle TEXT NOT NULL,
    dependencies_json TEXT NOT NULL,
    original_byte_length BIGINT NOT NULL,
    stored_byte_length BIGINT NOT NULL,
    data BYTEA NOT NULL
);

CREATE INDEX IF NOT EXISTS typed_objects_session_created
    ON typed_objects(session_id, created_at DESC);

-- The budget row: bytes the originals hold (ccr_spec §7.1), kept in step by every write in the
-- same transaction. Writers lock this one row (SELECT ... FOR UPDATE) around check-and-write,
-- so concurrent writers on any number of hosts can never overshoot CAVEMAN_CCR_MAX_BYTES.
CREATE TABLE IF NOT EXISTS ccr_usage (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    used_bytes BIGINT NOT NULL
);

INSERT INTO ccr_usage (id, used_bytes)
SELECT 1,
       (SELECT COALESCE(SUM(LENGTH(original) + COALESCE(LENGTH(metadata), 0)), 0) FROM recoveries)
     + (SELECT COALESCE(SUM(LENGTH(data) + LENGTH(dependencies_json)), 0) FROM typed_objects)
ON CONFLICT (id) DO NOTHING;
