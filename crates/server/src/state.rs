//! What every handler shares, and admission: finding a topology and taking a
//! slot of its bounded concurrency.

use glassbox_engine::{CancellationToken, Outcome, RunOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use glassbox_store::{Durable, StoreWriter, TraceStore};
use glassbox_trace::RequestId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::{Caller, Keys, RateLimiter, Work};
use crate::catalog::{Catalog, Served};
use crate::config::{Config, Durability};
use crate::error::ApiError;
use crate::metrics::{InFlight, Metrics};

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
    pub gates: Arc<Gates>,
    /// False until the first scan is done, and again once shutdown begins.
    pub ready: Arc<AtomicBool>,
    /// Where pipelines run: a runtime of their own, so HTTP handlers wait
    /// for them without holding an HTTP worker (see [`Admitted::run`]).
    pub engine: Arc<EngineRuntime>,
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

/// The pipelines' runtime. Shut down in the background when dropped, which
/// is allowed from inside another runtime (a plain drop is not).
#[derive(Debug)]
pub struct EngineRuntime(Option<tokio::runtime::Runtime>);

impl EngineRuntime {
    pub fn new() -> std::io::Result<EngineRuntime> {
        let threads = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("glassbox-engine")
            .enable_all()
            .build()
            .map(|rt| EngineRuntime(Some(rt)))
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(tokio::runtime::Runtime::handle)
    }
}

impl Drop for EngineRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

/// One semaphore per topology id, kept across reloads so that a new version
/// does not get a fresh allowance while the old one still runs.
#[derive(Debug)]
pub struct Gates {
    config: Arc<Config>,
    map: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Gates {
    pub fn new(config: Arc<Config>) -> Gates {
        Gates {
            config,
            map: Mutex::default(),
        }
    }

    fn semaphore(&self, id: &str) -> Arc<Semaphore> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(id.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.concurrency_for(id))))
            .clone()
    }
}

/// A request allowed to run: holds its concurrency slot and in-flight count.
pub struct Admitted {
    pub served: Arc<Served>,
    _permit: OwnedSemaphorePermit,
    _in_flight: InFlight,
}

impl Admitted {
    /// Runs the request on the engine runtime, holding the admission (permit
    /// and in-flight count) until it ends, while the HTTP handler waits
    /// without occupying an HTTP worker. Requests that arrive meanwhile reach
    /// [`AppState::admit`] and get 429 once the topology is full, even when
    /// its nodes are pure CPU and never yield. Dropping the returned future
    /// (the client went away) cancels the run.
    ///
    /// Returns once the request's trace has committed (see
    /// [`AppState::trace_ticket`]), so the answer built from the outcome
    /// never names a trace a crash could still lose; a trace that cannot be
    /// stored is an error (503) instead of an answer.
    pub async fn run(
        self,
        state: &AppState,
        input: serde_json::Value,
        mut options: RunOptions,
    ) -> Result<Outcome, ApiError> {
        let id = *options.request_id.get_or_insert_with(RequestId::new);
        let ticket = state.trace_ticket(id);
        let cancel = options
            .cancel
            .get_or_insert_with(CancellationToken::new)
            .clone();
        let _cancel_on_drop = cancel.drop_guard();
        let pipeline = self.served.pipeline.clone();
        let job = async move {
            let outcome = pipeline.run(input, options).await;
            drop(self);
            outcome
        };
        let task = match state.engine.handle() {
            Some(h) => h.spawn(job),
            None => tokio::spawn(job),
        };
        let outcome = match task.await {
            Ok(outcome) => outcome,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        };
        trace_committed(ticket).await?;
        Ok(outcome)
    }
}

/// Waits for a ticket from [`AppState::trace_ticket`], once its request has
/// ended; `None` (durability `async`) returns at once.
pub async fn trace_committed(ticket: Option<Durable>) -> Result<(), ApiError> {
    let Some(ticket) = ticket else {
        return Ok(());
    };
    let id = ticket.request_id();
    ticket.committed().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "trace_not_stored",
            format!(
                "request {id} ran, but its trace could not be stored, so its answer is withheld: {e} [{}]",
                e.code()
            ),
        )
        .hint("the trace store is failing or the server is stopping: check the server log (`glassbox doctor` checks the store), then retry")
        .retry_after(1)
    })
}

impl AppState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The served topology `id`, or 404 naming the ones that exist.
    pub fn topology(&self, id: &str) -> Result<Arc<Served>, ApiError> {
        self.catalog.get(id).ok_or_else(|| {
            let ids = self.catalog.ids();
            let hint =
                match glassbox_topology::diagnostic::closest(id, ids.iter().map(String::as_str)) {
                    Some(c) => format!("did you mean `{c}`? (GET /v1/topologies lists them)"),
                    None if ids.is_empty() => {
                        "no topology is served: check the server log for invalid files".into()
                    }
                    None => format!("served: {}", ids.join(", ")),
                };
            ApiError::not_found(
                "topology_not_found",
                format!("no topology `{id}` is served"),
            )
            .hint(hint)
        })
    }

    /// Finds the topology and takes a concurrency slot, or answers 429 at
    /// once: requests never wait in an unbounded queue.
    pub fn admit(&self, id: &str) -> Result<Admitted, ApiError> {
        let served = self.topology(id)?;
        let sem = self.gates.semaphore(id);
        let permit = sem.try_acquire_owned().map_err(|_| {
            self.metrics.rejected(id, "overloaded");
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "overloaded",
                format!(
                    "topology `{id}` is running its limit of {} concurrent requests",
                    self.config.concurrency_for(id)
                ),
            )
            .hint("retry after the number of seconds in `Retry-After`, or raise `max_concurrency` for this topology")
            .retry_after(1)
        })?;
        Ok(Admitted {
            served,
            _permit: permit,
            _in_flight: self.metrics.in_flight(id),
        })
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

    /// With `[store] durability = "commit"` (the default), a ticket for
    /// request `id`, which has not run yet: [`trace_committed`] then waits
    /// until its trace has committed, sharing the commit with every other
    /// request waiting at the time (group commit). `None` with `async`.
    pub fn trace_ticket(&self, id: RequestId) -> Option<Durable> {
        (self.config.store.durability == Durability::Commit).then(|| self.writer.durable(id))
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
