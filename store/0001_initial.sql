-- The recovery store, as the reference engine first created it (ccr_spec §3). Keeping the same
-- tables and columns lets every Caveman tool share one ccr.db.
CREATE TABLE IF NOT EXISTS recoveries (
    handle TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    content_type TEXT NOT NULL,
    compressor TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    original BLOB NOT NULL
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
    original_byte_length INTEGER NOT NULL,
    stored_byte_length INTEGER NOT NULL,
    data BLOB NOT NULL
);

CREATE INDEX IF NOT EXISTS typed_objects_session_created
    ON typed_objects(session_id, created_at DESC);
