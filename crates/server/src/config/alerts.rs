//! The `[alerts]` and `[alerts.gpu]` sections: drift-alert windows and
//! thresholds (evaluated by `crate::alerts`), GPU alert thresholds
//! (applied by `crate::gpu_monitor`). Every field is described there.

use std::time::Duration;

use glassbox_store::drift::{DriftOptions, Thresholds};
use glassbox_store::time::parse_duration;
use serde::{Deserialize, Serialize};

/// The `[alerts]` section of the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertSettings {
    pub enabled: bool,
    pub window: String,
    pub baseline: String,
    pub interval: String,
    pub thresholds: Thresholds,
    /// GPU readings and their alerts (`crate::gpu_monitor`).
    pub gpu: GpuAlertSettings,
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

/// The `[alerts.gpu]` section of the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuAlertSettings {
    pub enabled: bool,
    pub interval: String,
    pub temperature_celsius: f64,
    pub memory_ratio: f64,
    pub utilization_ratio: f64,
    pub utilization_for: String,
}

impl Default for GpuAlertSettings {
    fn default() -> Self {
        GpuAlertSettings {
            enabled: true,
            interval: "5s".into(),
            temperature_celsius: 85.0,
            memory_ratio: 0.95,
            utilization_ratio: 0.95,
            utilization_for: "10m".into(),
        }
    }
}

impl GpuAlertSettings {
    /// Every problem, each naming its field.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = [
            ("interval", &self.interval),
            ("utilization_for", &self.utilization_for),
        ]
        .into_iter()
        .filter_map(|(name, v)| {
            parse_duration(v)
                .err()
                .map(|e| format!("alerts.gpu: `{name}`: {e}"))
        })
        .collect();
        if !(self.temperature_celsius > 0.0 && self.temperature_celsius.is_finite()) {
            out.push(format!(
                "alerts.gpu: `temperature_celsius` must be a positive number of °C (got {})",
                self.temperature_celsius
            ));
        }
        for (name, v) in [
            ("memory_ratio", self.memory_ratio),
            ("utilization_ratio", self.utilization_ratio),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                out.push(format!(
                    "alerts.gpu: `{name}` must be a ratio in (0, 1], e.g. 0.95 for 95% (got {v})"
                ));
            }
        }
        out
    }

    pub fn interval(&self) -> Duration {
        Duration::from_micros(parse_duration(&self.interval).unwrap_or(5_000_000))
    }

    pub fn utilization_for_us(&self) -> u64 {
        parse_duration(&self.utilization_for).unwrap_or(600_000_000)
    }
}
