//! Opening each backend for one test.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use glassbox_store::pg_temp::{TempPostgres, TempPostgresOptions};
use glassbox_store::{PostgresStore, SqliteStore, StoreWriter, TraceStore, WriterOptions};

/// A store for one test, with what keeps it alive (a temp dir, a server).
pub struct Fixture {
    pub store: Box<dyn TraceStore>,
    reopen: Box<dyn Fn() -> Box<dyn TraceStore>>,
    _guard: Box<dyn std::any::Any>,
}

impl Fixture {
    /// A second connection to the same database.
    pub fn reopen(&self) -> Box<dyn TraceStore> {
        (self.reopen)()
    }
}

pub fn sqlite() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("traces.db");
    let p2 = path.clone();
    Fixture {
        store: Box::new(SqliteStore::open(&path).unwrap()),
        reopen: Box::new(move || Box::new(SqliteStore::open(&p2).unwrap())),
        _guard: Box::new(dir),
    }
}

/// A writer with the default options over a fresh SQLite file, and the
/// temp dir that holds it (keep it alive as long as the writer).
pub fn sqlite_writer() -> (tempfile::TempDir, StoreWriter) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    let writer = StoreWriter::spawn(Box::new(store), WriterOptions::default()).unwrap();
    (dir, writer)
}

static SERVER: Mutex<Weak<TempPostgres>> = Mutex::new(Weak::new());
static DB: AtomicU32 = AtomicU32::new(0);

/// The shared throwaway server: started by the first test that needs it,
/// stopped when the last one holding it finishes. Fails, never skips.
pub fn pg_server() -> Arc<TempPostgres> {
    let mut slot = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pg) = slot.upgrade() {
        return pg;
    }
    let pg = match TempPostgres::start(TempPostgresOptions::default()) {
        Ok(pg) => Arc::new(pg),
        Err(e) => panic!("PostgreSQL tests need a throwaway server and it did not start: {e}"),
    };
    *slot = Arc::downgrade(&pg);
    pg
}

pub fn postgres() -> Fixture {
    let pg = pg_server();
    let name = format!("t{}", DB.fetch_add(1, Ordering::Relaxed));
    let url = pg.create_database(&name).unwrap();
    let u2 = url.clone();
    Fixture {
        store: Box::new(PostgresStore::connect(&url).unwrap()),
        reopen: Box::new(move || Box::new(PostgresStore::connect(&u2).unwrap())),
        _guard: Box::new(pg),
    }
}
