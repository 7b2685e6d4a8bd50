//! The shared suite against SQLite, plus SQLite-only checks.

crate::suite::store_suite!(crate::fixture::sqlite);

#[test]
fn uses_wal_and_creates_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("traces.db");
    let store = glassbox_store::SqliteStore::open(&path).unwrap();
    let mode: String = store
        .connection()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(path.is_file());
}

#[test]
fn default_path_follows_xdg_data_home() {
    // Read-only check of the rule, without touching the environment.
    let path = glassbox_store::default_sqlite_path().unwrap();
    assert!(path.ends_with("glassbox/traces.db"), "{}", path.display());
}

/// Takes a schema-5 database back to schema 4 (the columns and index
/// migration 5 added), as an older Glassbox left it.
pub const UNDO_5: &str = "DROP INDEX requests_report;
     ALTER TABLE requests DROP COLUMN input_len;
     ALTER TABLE requests DROP COLUMN input_tokens;
     ALTER TABLE spans DROP COLUMN critical_us;
     ALTER TABLE spans DROP COLUMN req_input_len;
     CREATE INDEX requests_report ON requests (topology_id, started_at_us, version, model_key,
         duration_us, status, degraded, timeouts, cost_f, path_key, top_node, input_chars);";

/// A store written at schema 3 (text ids, JSON text) opens at schema 5 with
/// every request readable (without the real input length, which schema 3
/// rows never had) and its ids converted.
#[test]
fn migrates_schema_3_rows() {
    use glassbox_store::TraceStore;
    use glassbox_store::synth::{SynthRequest, build};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let mut reqs = Vec::new();
    {
        let mut store = glassbox_store::SqliteStore::open(&path).unwrap();
        for i in 0..3u64 {
            let mut r = SynthRequest::new(10 + i, crate::suite::T0 + i);
            r.fallback = i == 1;
            crate::suite::put(&mut store, &r);
            reqs.push(r);
        }
        // Rewrite the rows as schema 3 stored them.
        let conn = store.connection();
        for r in &reqs {
            let (record, _) = build(r);
            conn.execute(
                "UPDATE requests SET path = ?2, receipt = ?3, explanation = ?4 WHERE request_id = ?1",
                rusqlite::params![
                    record.request_id.0.to_be_bytes(),
                    serde_json::to_string(&record.path).unwrap(),
                    serde_json::to_string(&record.receipt).unwrap(),
                    serde_json::to_string(&record.explanation).unwrap(),
                ],
            )
            .unwrap();
        }
        let dashed = "lower(substr(hex(request_id), 1, 8) || '-' || substr(hex(request_id), 9, 4) \
             || '-' || substr(hex(request_id), 13, 4) || '-' || substr(hex(request_id), 17, 4) \
             || '-' || substr(hex(request_id), 21))";
        conn.execute_batch(&format!(
            "UPDATE requests SET request_id = {dashed};
             UPDATE spans SET request_id = {dashed};
             {UNDO_5}
             DELETE FROM schema_version WHERE version >= 4;"
        ))
        .unwrap();
        let kinds: Vec<String> = conn
            .prepare("SELECT DISTINCT typeof(request_id) || typeof(path) FROM requests")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(kinds, ["texttext"]);
    }
    let mut store = glassbox_store::SqliteStore::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), 5);
    crate::suite::assert_stored_before_5(&mut store, &reqs);
    let text_ids: i64 = store
        .connection()
        .query_row(
            "SELECT (SELECT COUNT(*) FROM requests WHERE typeof(request_id) <> 'blob')
                  + (SELECT COUNT(*) FROM spans WHERE typeof(request_id) <> 'blob')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(text_ids, 0);
    store.integrity_check().unwrap();
}
