//! Drift alerts in the server: the latest
//! evaluation (read by `GET /v1/alerts` and exported on `/metrics` as
//! `glassbox_alerts_firing{kind,topology,node}`), and the task that
//! re-evaluates every `interval`.
//!
//! The evaluation itself is `glassbox_store::drift::evaluate` (the same the
//! `glassbox alerts` command runs), on a read connection of the pool, so a
//! slow evaluation never holds up the request path.
//!
//! ```toml
//! [alerts]                     # every field optional; these are the defaults
//! enabled = true               # evaluate periodically
//! window = "1h"                # the traffic checked: the last hour
//! baseline = "24h"             # against the 24 hours before it
//! interval = "1m"              # how often
//!
//! [alerts.thresholds]
//! min_samples = 50             # requests (or a node's spans) per window
//! alpha = 0.001                # significance per topology (Bonferroni-split)
//! route_shift = 0.10           # a path's share moved by 10 points
//! p99_ratio = 1.5              # a node's P99 grew 1.5x ...
//! p99_min_ms = 5.0             # ... and by 5 ms
//! cost_ratio = 1.25            # mean cost per request grew 1.25x
//!
//! [alerts.gpu]                 # GPU alerts: see `crate::gpu_monitor`
//! temperature_celsius = 85.0
//! ```

use std::sync::{Arc, PoisonError, RwLock};

use glassbox_store::drift::{self, Evaluation};

pub use crate::config::AlertSettings;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::read_pool::ReadPool;

/// The latest evaluation, and what evaluating needs: the settings, a
/// read connection, the metrics to publish to. Only these handles, not the
/// server's whole state.
#[derive(Debug)]
pub struct AlertBoard {
    settings: AlertSettings,
    readers: Arc<ReadPool>,
    metrics: Arc<Metrics>,
    latest: RwLock<Option<Arc<Evaluation>>>,
}

impl AlertBoard {
    pub fn new(settings: AlertSettings, readers: Arc<ReadPool>, metrics: Arc<Metrics>) -> Self {
        AlertBoard {
            settings,
            readers,
            metrics,
            latest: RwLock::new(None),
        }
    }

    pub fn latest(&self) -> Option<Arc<Evaluation>> {
        self.latest
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, ev: Arc<Evaluation>) {
        *self.latest.write().unwrap_or_else(PoisonError::into_inner) = Some(ev);
    }

    /// Evaluates now with the configured settings, publishes the result
    /// (the board and the `glassbox_alerts_firing` gauge) and returns it.
    pub async fn evaluate_now(&self) -> Result<Arc<Evaluation>, ApiError> {
        let options = self
            .settings
            .options(glassbox_trace::unix_micros_now(), None);
        let ev = self
            .readers
            .run(move |store| drift::evaluate(store, &options).map_err(ApiError::from))
            .await?;
        let ev = Arc::new(ev);
        self.metrics.set_alerts(&ev.alerts);
        self.set(ev.clone());
        Ok(ev)
    }
}

/// Re-evaluates every `interval` until `stop` (first at once).
pub async fn run_periodically(board: Arc<AlertBoard>, stop: glassbox_engine::CancellationToken) {
    if !board.settings.enabled {
        return;
    }
    let every = board.settings.interval();
    loop {
        if let Err(e) = board.evaluate_now().await {
            glassbox_app::console::serve_line(format_args!("drift alert evaluation failed: {e}"));
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}
