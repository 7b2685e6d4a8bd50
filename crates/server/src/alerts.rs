//! Drift alerts in the server: the `[alerts]` settings, the latest
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
use std::time::Duration;

use glassbox_store::drift::{self, DriftOptions, Evaluation, Thresholds};
use glassbox_store::time::parse_duration;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::state::AppState;

/// The `[alerts]` section of the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertSettings {
    pub enabled: bool,
    pub window: String,
    pub baseline: String,
    pub interval: String,
    pub thresholds: Thresholds,
    /// GPU readings and their alerts ([`crate::gpu_monitor`]).
    pub gpu: crate::gpu_monitor::GpuAlertSettings,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            enabled: true,
            window: "1h".into(),
            baseline: "24h".into(),
            interval: "1m".into(),
            thresholds: Thresholds::default(),
            gpu: Default::default(),
        }
    }
}

impl AlertSettings {
    /// Every problem, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = [
            ("window", &self.window),
            ("baseline", &self.baseline),
            ("interval", &self.interval),
        ]
        .into_iter()
        .filter_map(|(name, v)| {
            parse_duration(v)
                .err()
                .map(|e| format!("alerts: `{name}`: {e}"))
        })
        .collect();
        out.extend(
            self.thresholds
                .problems()
                .into_iter()
                .map(|p| format!("alerts.thresholds: {p}")),
        );
        out.extend(self.gpu.problems());
        out
    }

    fn length(v: &str, default_us: u64) -> u64 {
        parse_duration(v).unwrap_or(default_us)
    }

    /// What to evaluate at `now_us` (settings were checked on load).
    pub fn options(&self, now_us: u64, topology: Option<String>) -> DriftOptions {
        DriftOptions {
            topology,
            now_us,
            window_us: Self::length(&self.window, 3_600_000_000),
            baseline_us: Self::length(&self.baseline, 86_400_000_000),
            thresholds: self.thresholds,
        }
    }

    pub fn interval(&self) -> Duration {
        Duration::from_micros(Self::length(&self.interval, 60_000_000))
    }
}

/// The latest evaluation.
#[derive(Debug, Default)]
pub struct AlertBoard {
    latest: RwLock<Option<Arc<Evaluation>>>,
}

impl AlertBoard {
    pub fn latest(&self) -> Option<Arc<Evaluation>> {
        self.latest
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, ev: Arc<Evaluation>) {
        *self.latest.write().unwrap_or_else(PoisonError::into_inner) = Some(ev);
    }
}

/// Evaluates now with the configured settings, publishes the result (the
/// board and the `glassbox_alerts_firing` gauge) and returns it.
pub async fn evaluate_now(state: &AppState) -> Result<Arc<Evaluation>, ApiError> {
    let options = state
        .config
        .alerts
        .options(glassbox_trace::unix_micros_now(), None);
    let ev = state
        .with_store(move |store| drift::evaluate(store, &options).map_err(ApiError::from))
        .await?;
    let ev = Arc::new(ev);
    state.metrics.set_alerts(&ev.alerts);
    state.alerts.set(ev.clone());
    Ok(ev)
}

/// Re-evaluates every `interval` until `stop` (first at once).
pub async fn run_periodically(state: AppState, stop: glassbox_engine::CancellationToken) {
    if !state.config.alerts.enabled {
        return;
    }
    let every = state.config.alerts.interval();
    loop {
        if let Err(e) = evaluate_now(&state).await {
            eprintln!("glassbox serve: drift alert evaluation failed: {e}");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}
