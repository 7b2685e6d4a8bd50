//! What every handler shares: the request service, the store (trace writer
//! and read connections), keys and rate limits, metrics, readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use glassbox_store::{StoreWriter, TraceStore};

pub use crate::read_pool::ReadPool;

use crate::alerts::AlertBoard;
use crate::auth::{Caller, Keys, RateLimiter, Work};
use crate::config::Config;
use crate::error::ApiError;
use crate::gpu_monitor::GpuMonitor;
use crate::metrics::Metrics;
use crate::service::Service;
use glassbox_app::catalog::Catalog;
use glassbox_app::served::Served;

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
    pub alerts: Arc<AlertBoard>,
    /// GPU readings and alerts (`/v1/gpus`, `/v1/alerts`, `/metrics`).
    pub gpus: Arc<GpuMonitor>,
    /// The worker pool (`glassbox serve --cluster`), kept in step with etcd
    /// by the caller; `None` on a single server.
    pub pool: Option<glassbox_cluster::Pool>,
    /// The OTLP receiver (`POST /v1/traces`): spans held for their root,
    /// and their log.
    pub ingest: Arc<glassbox_ingest::Receiver>,
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
        Ok(self.service.topology(id)?)
    }

    /// Takes `more` from the caller's rate limit for a request whose whole
    /// cost is `total`, or answers 429.
    pub fn charge(&self, caller: &Caller, more: Work, total: Work) -> Result<(), ApiError> {
        Ok(self
            .limiter
            .charge(caller, more, total)
            .inspect_err(|e| self.metrics.rejected("-", e.code()))?)
    }

    /// Runs `f` with a read connection on a blocking thread.
    pub async fn with_store<T, F>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn TraceStore) -> Result<T, ApiError> + Send + 'static,
    {
        self.readers.run(f).await
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
