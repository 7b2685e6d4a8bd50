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
