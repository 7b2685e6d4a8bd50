//! A few read connections to the trace store, so a slow read (a report
//! over a million requests) does not hold up trace lookups. SQLite in WAL
//! mode and PostgreSQL both serve concurrent readers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use glassbox_store::TraceStore;

use crate::error::ApiError;

/// The pool (shared behind an `Arc`).
pub struct ReadPool {
    conns: Vec<Mutex<Box<dyn TraceStore>>>,
    next: AtomicUsize,
}

impl ReadPool {
    /// How many connections the server opens.
    pub const SIZE: usize = 4;

    /// A pool of the given connections; at least one.
    pub fn new(conns: Vec<Box<dyn TraceStore>>) -> ReadPool {
        assert!(!conns.is_empty(), "a read pool needs a connection");
        ReadPool {
            conns: conns.into_iter().map(Mutex::new).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Runs `f` on a free connection, or waits for one if all are busy.
    /// Blocking: call from a blocking thread.
    pub fn with<T>(&self, f: impl FnOnce(&mut dyn TraceStore) -> T) -> T {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            if let Ok(mut conn) = self.conns[(start + i) % n].try_lock() {
                return f(&mut **conn);
            }
        }
        let mut conn = self.conns[start % n]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut **conn)
    }
}

impl Drop for ReadPool {
    /// A PostgreSQL connection closes by blocking on a runtime of its own,
    /// which panics inside another runtime, and the pool is dropped with the
    /// server's state on a runtime thread: SIGTERM on a PostgreSQL store
    /// ended in an abort (exit 134) after the traces were flushed. So the
    /// connections are closed on a plain thread.
    fn drop(&mut self) {
        let conns = std::mem::take(&mut self.conns);
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let closing = std::thread::Builder::new()
            .name("gb-store-close".into())
            .spawn(move || drop(conns));
        if let Ok(thread) = closing {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for ReadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadPool")
            .field("connections", &self.conns.len())
            .finish()
    }
}

impl ReadPool {
    /// Runs `f` with a read connection on a blocking thread.
    pub async fn run<T, F>(self: &std::sync::Arc<Self>, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn TraceStore) -> Result<T, ApiError> + Send + 'static,
    {
        let readers = self.clone();
        tokio::task::spawn_blocking(move || readers.with(f))
            .await
            .map_err(|e| {
                ApiError::internal("store_task_failed", format!("the store task failed: {e}"))
            })?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_busy_read_connection_does_not_hold_up_the_next_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("traces.db");
        let conns = (0..2)
            .map(|_| {
                glassbox_store::SqliteStore::open(&path)
                    .map(|s| Box::new(s) as Box<dyn TraceStore>)
                    .expect("open")
            })
            .collect();
        let pool = Arc::new(ReadPool::new(conns));
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let slow = {
            let pool = pool.clone();
            std::thread::spawn(move || {
                pool.with(|store| {
                    held_tx.send(()).expect("send");
                    // Held until the other read is done (or the test gave up).
                    let _ = release_rx.recv_timeout(Duration::from_secs(60));
                    store.counts().expect("counts")
                })
            })
        };
        held_rx.recv().expect("the slow read started");
        let (done_tx, done_rx) = mpsc::channel();
        {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let _ = done_tx.send(pool.with(|store| store.counts().expect("counts")));
            });
        }
        let other = done_rx.recv_timeout(Duration::from_secs(30));
        release_tx.send(()).expect("release");
        assert_eq!(other.expect("the second read waited for the first"), (0, 0));
        assert_eq!(slow.join().expect("join"), (0, 0));
    }
}
