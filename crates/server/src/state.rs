//! What every handler shares: the request service, the store (trace writer
//! and read connections), keys and rate limits, metrics, readiness.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use glassbox_store::{StoreWriter, TraceStore};

use crate::auth::{Caller, Keys, RateLimiter, Work};
use crate::catalog::{Catalog, Served};
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::service::Service;

/// Shared by every handler; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub catalog: Arc<Catalog>,
    pub config: Arc<Config>,
    pub keys: Arc<Keys>,
    pub limiter: Arc<RateLimiter>,
    pub metrics: Arc<Metrics>,
    pub writer: Arc<StoreWriter>,
    /// Read connections, used from blocking threads.
    pub readers: Arc<ReadPool>,
    /// False until the first scan is done, and again once shutdown begins.
    pub ready: Arc<AtomicBool>,
    /// The one door requests go through: admission, the engine runtime,
    /// streaming, usage, the trace hand-off.
    pub service: Arc<Service>,
    /// The latest drift-alert evaluation (`/v1/alerts`, `/metrics`).
    pub alerts: Arc<crate::alerts::AlertBoard>,
    /// GPU readings and alerts (`/v1/gpus`, `/v1/alerts`, `/metrics`).
    pub gpus: Arc<crate::gpu_monitor::GpuMonitor>,
    /// The worker pool (`glassbox serve --cluster`), kept in step with etcd
    /// by the caller; `None` on a single server.
    pub pool: Option<glassbox_cluster::Pool>,
}

/// A few read connections, so a slow read (a report over a million
/// requests) does not hold up trace lookups. SQLite in WAL mode and
/// PostgreSQL both serve concurrent readers.
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

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

impl AppState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The served topology `id`, or 404 naming the ones that exist.
    pub fn topology(&self, id: &str) -> Result<Arc<Served>, ApiError> {
        self.service.topology(id)
    }

    /// Takes `more` from the caller's rate limit for a request whose whole
    /// cost is `total`, or answers 429.
    pub fn charge(&self, caller: &Caller, more: Work, total: Work) -> Result<(), ApiError> {
        self.limiter
            .charge(caller, more, total)
            .inspect_err(|e| self.metrics.rejected("-", e.code))
    }

    /// Runs `f` with a read connection on a blocking thread.
    pub async fn with_store<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn TraceStore) -> Result<T, ApiError> + Send + 'static,
    {
        let readers = self.readers.clone();
        tokio::task::spawn_blocking(move || readers.with(f))
            .await
            .map_err(|e| {
                ApiError::internal("store_task_failed", format!("the store task failed: {e}"))
            })?
    }

    /// Waits until every trace sent so far is committed.
    pub async fn flush_traces(&self) -> Result<(), ApiError> {
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || writer.flush())
            .await
            .map_err(|e| {
                ApiError::internal("store_task_failed", format!("the store task failed: {e}"))
            })?
            .map_err(ApiError::from)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

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
