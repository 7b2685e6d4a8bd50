//! GPU monitoring in the server: the latest
//! readings of every worker's GPUs (this machine's through NVML, see
//! `glassbox_cluster::gpu`), the alerts they raise, and the task that
//! samples every `interval`.
//!
//! Readings are exported on `/metrics` (`glassbox_gpu_*{worker,gpu,name}`)
//! and answered by `GET /v1/gpus`; firing alerts join the drift alerts in
//! `GET /v1/alerts` (`gpu_alerts`) and `glassbox_alerts_firing{kind="gpu_…"}`.
//! An alert is logged once when it starts and once when it clears.
//!
//! ```toml
//! [alerts.gpu]                 # every field optional; these are the defaults
//! enabled = true               # sample the GPUs (nothing to do without NVML)
//! interval = "5s"              # how often
//! temperature_celsius = 85.0   # gpu_temperature: at or above this
//! memory_ratio = 0.95          # gpu_memory: used / total at or above this
//! utilization_ratio = 0.95     # gpu_utilization: at or above this ...
//! utilization_for = "10m"      # ... in every sample for this long
//! ```
//!
//! The alert rules are plain functions of the readings and their times
//! ([`Alerting::observe`]), so they are tested with injected samples and no
//! clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use glassbox_cluster::gpu::{GpuSource, GpuStats};
use serde::{Deserialize, Serialize};

pub use crate::config::GpuAlertSettings;
use crate::metrics::{AlertLabels, Metrics};

/// What a GPU alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuAlertKind {
    /// The die at or above `temperature_celsius`.
    GpuTemperature,
    /// Memory used over total at or above `memory_ratio`.
    GpuMemory,
    /// Utilisation at or above `utilization_ratio` for `utilization_for`.
    GpuUtilization,
}

impl GpuAlertKind {
    pub const ALL: [GpuAlertKind; 3] = [
        GpuAlertKind::GpuTemperature,
        GpuAlertKind::GpuMemory,
        GpuAlertKind::GpuUtilization,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GpuAlertKind::GpuTemperature => "gpu_temperature",
            GpuAlertKind::GpuMemory => "gpu_memory",
            GpuAlertKind::GpuUtilization => "gpu_utilization",
        }
    }

    /// The reading this kind watches, and its threshold.
    fn reading(self, s: &GpuStats, settings: &GpuAlertSettings) -> (Option<f64>, f64) {
        match self {
            GpuAlertKind::GpuTemperature => (s.temperature_celsius, settings.temperature_celsius),
            GpuAlertKind::GpuMemory => (s.memory_ratio(), settings.memory_ratio),
            GpuAlertKind::GpuUtilization => (s.utilization, settings.utilization_ratio),
        }
    }

    fn describe(self, value: f64, threshold: f64, settings: &GpuAlertSettings) -> String {
        match self {
            GpuAlertKind::GpuTemperature => {
                format!("at {value:.0} °C, at or above the {threshold:.0} °C limit")
            }
            GpuAlertKind::GpuMemory => format!(
                "memory {:.1}% used, at or above {:.1}%",
                100.0 * value,
                100.0 * threshold
            ),
            GpuAlertKind::GpuUtilization => format!(
                "utilisation {:.0}%, at or above {:.0}% for {} or more",
                100.0 * value,
                100.0 * threshold,
                settings.utilization_for
            ),
        }
    }
}

/// A GPU alert firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuAlert {
    pub kind: GpuAlertKind,
    pub worker: String,
    /// The GPU's index on its worker.
    pub gpu: u32,
    pub name: String,
    /// The latest reading (°C, or a ratio 0–1).
    pub value: f64,
    pub threshold: f64,
    /// When the condition started to hold (µs since the epoch): for
    /// utilisation, the first sample of the sustained stretch.
    pub since_us: u64,
    pub message: String,
}

/// An alert starting or clearing, to be logged once.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Started(GpuAlert),
    Cleared(GpuAlert),
}

impl GpuAlert {
    /// Its labels on `glassbox_alerts_firing`.
    pub fn labels(&self) -> AlertLabels {
        vec![
            ("kind", self.kind.as_str().to_string()),
            ("worker", self.worker.clone()),
            ("gpu", self.gpu.to_string()),
            ("name", self.name.clone()),
        ]
    }
}

impl Change {
    /// The log line.
    pub fn describe(&self) -> String {
        match self {
            Change::Started(a) => format!("GPU alert `{}` firing: {}", a.kind.as_str(), a.message),
            Change::Cleared(a) => format!("GPU alert `{}` cleared: {}", a.kind.as_str(), a.message),
        }
    }
}

type AlertKey = (String, u32, GpuAlertKind);

#[derive(Debug, Default)]
struct Tracker {
    /// When the reading went (and stayed) at or above the threshold.
    above_since_us: Option<u64>,
    firing: Option<GpuAlert>,
}

/// The alert rules' state: per worker, GPU and kind, since when the
/// threshold has been crossed and whether the alert fires.
#[derive(Debug, Default)]
pub struct Alerting {
    trackers: BTreeMap<AlertKey, Tracker>,
}

impl Alerting {
    /// Takes one worker's readings at `now_us` (all its GPUs: one missing
    /// from the list has gone, and its alerts clear). A reading that is
    /// absent leaves that alert as it was.
    pub fn observe(
        &mut self,
        settings: &GpuAlertSettings,
        worker: &str,
        samples: &[GpuStats],
        now_us: u64,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        let present: Vec<u32> = samples.iter().map(|s| s.index).collect();
        let gone: Vec<AlertKey> = self
            .trackers
            .keys()
            .filter(|(w, gpu, _)| w == worker && !present.contains(gpu))
            .cloned()
            .collect();
        for key in gone {
            if let Some(mut alert) = self.trackers.remove(&key).and_then(|t| t.firing) {
                alert.message = format!("{} (no longer reported)", alert.message);
                changes.push(Change::Cleared(alert));
            }
        }
        for s in samples {
            for kind in GpuAlertKind::ALL {
                let (reading, threshold) = kind.reading(s, settings);
                let Some(value) = reading else { continue };
                let key = (worker.to_string(), s.index, kind);
                let t = self.trackers.entry(key).or_default();
                if value < threshold {
                    t.above_since_us = None;
                    if let Some(mut alert) = t.firing.take() {
                        alert.value = value;
                        alert.message = format!(
                            "GPU {} ({}) on `{worker}`: back to {}",
                            s.index,
                            s.name,
                            Self::level(kind, value)
                        );
                        changes.push(Change::Cleared(alert));
                    }
                    continue;
                }
                let since = *t.above_since_us.get_or_insert(now_us);
                let held = match kind {
                    GpuAlertKind::GpuUtilization => {
                        now_us.saturating_sub(since) >= settings.utilization_for_us()
                    }
                    _ => true,
                };
                let message = format!(
                    "GPU {} ({}) on `{worker}` {}",
                    s.index,
                    s.name,
                    kind.describe(value, threshold, settings)
                );
                match &mut t.firing {
                    Some(alert) => {
                        alert.value = value;
                        alert.message = message;
                    }
                    None if held => {
                        let alert = GpuAlert {
                            kind,
                            worker: worker.to_string(),
                            gpu: s.index,
                            name: s.name.clone(),
                            value,
                            threshold,
                            since_us: since,
                            message,
                        };
                        t.firing = Some(alert.clone());
                        changes.push(Change::Started(alert));
                    }
                    None => {}
                }
            }
        }
        changes
    }

    fn level(kind: GpuAlertKind, value: f64) -> String {
        match kind {
            GpuAlertKind::GpuTemperature => format!("{value:.0} °C"),
            GpuAlertKind::GpuMemory => format!("{:.1}% memory used", 100.0 * value),
            GpuAlertKind::GpuUtilization => format!("{:.0}% utilisation", 100.0 * value),
        }
    }

    /// Every alert firing, by worker, GPU and kind.
    pub fn firing(&self) -> Vec<GpuAlert> {
        self.trackers
            .values()
            .filter_map(|t| t.firing.clone())
            .collect()
    }
}

/// One GPU's latest readings, with the worker it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerGpu {
    pub worker: String,
    #[serde(flatten)]
    pub stats: GpuStats,
    /// Microseconds since the epoch when it was read.
    pub sampled_at_us: u64,
}

/// What `GET /v1/gpus` answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSnapshot {
    /// This machine's name in the `worker` label.
    pub worker: String,
    /// Why this machine reports no GPUs at all (NVML not loaded), if so.
    pub unavailable: Option<String>,
    pub settings: GpuAlertSettings,
    pub gpus: Vec<WorkerGpu>,
    pub alerts: Vec<GpuAlert>,
}

#[derive(Debug, Default)]
struct Latest {
    gpus: BTreeMap<String, (u64, Vec<GpuStats>)>,
    alerting: Alerting,
}

/// The server's GPU monitor: reads its source, keeps every worker's
/// latest readings, runs the alert rules, publishes to [`Metrics`].
pub struct GpuMonitor {
    source: Arc<dyn GpuSource>,
    worker: String,
    settings: GpuAlertSettings,
    metrics: Arc<Metrics>,
    latest: Mutex<Latest>,
}

impl std::fmt::Debug for GpuMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMonitor")
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl GpuMonitor {
    /// `worker` names this machine in labels and messages.
    pub fn new(
        source: Arc<dyn GpuSource>,
        worker: String,
        settings: GpuAlertSettings,
        metrics: Arc<Metrics>,
    ) -> GpuMonitor {
        GpuMonitor {
            source,
            worker,
            settings,
            metrics,
            latest: Mutex::new(Latest::default()),
        }
    }

    pub fn settings(&self) -> &GpuAlertSettings {
        &self.settings
    }

    /// Reads this machine's GPUs now and records them. Blocking (NVML
    /// calls): run on a blocking thread.
    pub fn sample_now(&self, now_us: u64) -> Vec<Change> {
        let samples = self.source.sample();
        self.record(&self.worker.clone(), samples, now_us)
    }

    /// Records one worker's readings (all its GPUs) taken at `now_us`:
    /// gauges, alerts, and a log line per alert that starts or clears.
    pub fn record(&self, worker: &str, samples: Vec<GpuStats>, now_us: u64) -> Vec<Change> {
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let changes = latest
            .alerting
            .observe(&self.settings, worker, &samples, now_us);
        self.metrics.set_gpus(worker, &samples);
        if samples.is_empty() {
            latest.gpus.remove(worker);
        } else {
            latest.gpus.insert(worker.to_string(), (now_us, samples));
        }
        if !changes.is_empty() {
            self.metrics.set_gpu_alerts(
                latest
                    .alerting
                    .firing()
                    .iter()
                    .map(GpuAlert::labels)
                    .collect(),
            );
        }
        drop(latest);
        for c in &changes {
            glassbox_app::console::serve_line(c.describe());
        }
        changes
    }

    /// Every alert firing now.
    pub fn firing(&self) -> Vec<GpuAlert> {
        self.latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .alerting
            .firing()
    }

    /// The latest readings of every worker and the alerts firing.
    pub fn snapshot(&self) -> GpuSnapshot {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let gpus = latest
            .gpus
            .iter()
            .flat_map(|(worker, (at, list))| {
                list.iter().map(|s| WorkerGpu {
                    worker: worker.clone(),
                    stats: s.clone(),
                    sampled_at_us: *at,
                })
            })
            .collect();
        GpuSnapshot {
            worker: self.worker.clone(),
            unavailable: self.source.unavailable().map(str::to_string),
            settings: self.settings.clone(),
            gpus,
            alerts: latest.alerting.firing(),
        }
    }
}

/// This machine's name for the `worker` label: the host name (a pod's name
/// in Kubernetes), else `local`.
pub fn local_worker_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "local".to_string())
}

/// Samples every `interval` until `stop` (the first sample is taken when
/// the server binds). Stops at once when disabled or when NVML is absent:
/// there is nothing to read.
pub async fn run_periodically(monitor: Arc<GpuMonitor>, stop: glassbox_engine::CancellationToken) {
    if !monitor.settings.enabled || monitor.source.unavailable().is_some() {
        return;
    }
    let every = monitor.settings.interval();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let m = monitor.clone();
        let now = glassbox_trace::unix_micros_now();
        if let Err(e) = tokio::task::spawn_blocking(move || m.sample_now(now)).await {
            glassbox_app::console::serve_line(format_args!("GPU sampling failed: {e}"));
        }
    }
}

#[cfg(test)]
mod tests;
