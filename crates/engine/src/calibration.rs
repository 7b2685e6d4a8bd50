//! Calibration files: prices measured on the machine that runs a topology.
//!
//! `glassbox calibrate TOPOLOGY` runs the topology, measures each node's
//! resource time per call, and prices it from the resource's hourly price
//! (DESIGN.md, cost model). The result is a dated JSON file next to the
//! topology ([`path_for`]): `rag.yaml` → `rag.calibration.json`. A pipeline
//! built with [`Calibration::prices`] in its options bills each calibrated
//! node by its measured `cost_per_call` instead of the topology's prices, so
//! receipts follow the resources used: a local model that takes 99% of the
//! time takes about 99% of the cost.
//!
//! A calibration goes stale: [`Calibration::warnings`] names what changed
//! since (its age past [`STALE_AFTER_DAYS`], the hardware, the topology
//! version, a model's version) so `run` and `serve` can say so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use glassbox_topology::Prices;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// Seed 001: calibrate every two weeks.
pub const STALE_AFTER_DAYS: i64 = 14;

/// One node's measured price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCalibration {
    pub id: String,
    /// `cpu` or `gpu`, as the topology tags it.
    pub resource: String,
    /// Calls measured.
    pub calls: u64,
    /// Mean wall time per call, ms.
    pub wall_ms: f64,
    /// Mean thread CPU time per call, ms (when the node reports it).
    pub cpu_ms: Option<f64>,
    /// The resource's price per hour the cost was derived from.
    pub hourly_usd: f64,
    /// How `cost_per_call` was derived, in words.
    pub basis: String,
    /// Exact decimal, written as a string.
    pub cost_per_call: Decimal,
}

/// A dated calibration of one topology on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub topology: String,
    pub version: String,
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// What it ran on ([`this_machine`], or a named device).
    pub hardware: String,
    /// Node id → model version tag seen while measuring.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    pub nodes: Vec<NodeCalibration>,
}

/// Why a calibration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("cannot read calibration `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("calibration `{}` is not valid: {message} (re-run `glassbox calibrate`)", path.display())]
    Parse { path: PathBuf, message: String },
}

/// Where the calibration of the topology at `topology` lives.
pub fn path_for(topology: &Path) -> PathBuf {
    let stem = topology
        .file_stem()
        .map_or_else(|| "topology".into(), |s| s.to_string_lossy().into_owned());
    topology.with_file_name(format!("{stem}.calibration.json"))
}

/// This machine in words: CPU model and logical cores (Linux), else the
/// architecture and cores.
pub fn this_machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{model} × {cores} threads")
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date.
pub fn days_of(date: &str) -> Option<i64> {
    let mut it = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, d) = (it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// Today (UTC) as days since 1970-01-01.
pub fn today_days() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs / 86_400) as i64
}

/// A day count as `YYYY-MM-DD`.
pub fn date_of(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

impl Calibration {
    pub fn load(path: &Path) -> Result<Self, CalibrationError> {
        let text = std::fs::read_to_string(path).map_err(|source| CalibrationError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let cal: Calibration =
            serde_json::from_str(&text).map_err(|e| CalibrationError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        if days_of(&cal.date).is_none() {
            return Err(CalibrationError::Parse {
                path: path.to_path_buf(),
                message: format!("`date` must be YYYY-MM-DD, got `{}`", cal.date),
            });
        }
        Ok(cal)
    }

    /// The calibration beside `topology`, if there is one.
    pub fn find(topology: &Path) -> Option<Result<Self, CalibrationError>> {
        let path = path_for(topology);
        path.exists().then(|| Self::load(&path))
    }

    /// Node id → the prices a pipeline bills it with: the measured
    /// `cost_per_call` alone.
    pub fn prices(&self) -> BTreeMap<String, Prices> {
        self.nodes
            .iter()
            .map(|n| {
                (
                    n.id.clone(),
                    Prices {
                        cost_per_call: Some(n.cost_per_call),
                        ..Prices::default()
                    },
                )
            })
            .collect()
    }

    /// What makes this calibration doubtful for a run today (`today` in
    /// days since 1970) on `hardware` of topology `version`, with these
    /// model versions seen (node → version; empty when not known yet).
    pub fn warnings(
        &self,
        today: i64,
        hardware: &str,
        version: &str,
        models: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(day) = days_of(&self.date) {
            let age = today - day;
            if age > STALE_AFTER_DAYS {
                out.push(format!(
                    "calibration of `{}` is {age} days old (from {}; recalibrate every {STALE_AFTER_DAYS} days): run `glassbox calibrate`",
                    self.topology, self.date
                ));
            }
        }
        if self.hardware != hardware {
            out.push(format!(
                "calibration of `{}` was measured on `{}`, this is `{hardware}`: run `glassbox calibrate` here",
                self.topology, self.hardware
            ));
        }
        if self.version != version {
            out.push(format!(
                "calibration of `{}` is for version {}, the topology is {version}: run `glassbox calibrate`",
                self.topology, self.version
            ));
        }
        out.extend(self.model_warnings(models));
        out
    }

    /// The nodes whose model changed since this calibration measured them
    /// (`models`: node → version tag seen in a run), one line each.
    pub fn model_warnings(&self, models: &BTreeMap<String, String>) -> Vec<String> {
        models
            .iter()
            .filter_map(|(node, seen)| {
                let then = self.models.get(node)?;
                (then != seen).then(|| {
                    format!(
                        "node `{node}` now runs model `{seen}`, calibrated with `{then}`: run `glassbox calibrate`"
                    )
                })
            })
            .collect()
    }

    /// [`model_warnings`](Self::model_warnings) for the models a request's
    /// record says it ran.
    pub fn record_warnings(&self, record: &glassbox_trace::RequestRecord) -> Vec<String> {
        let seen = record
            .models
            .iter()
            .map(|m| {
                let v = m.version.clone().unwrap_or_else(|| m.model.clone());
                (m.node.to_string(), v)
            })
            .collect();
        self.model_warnings(&seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn sample() -> Calibration {
        Calibration {
            topology: "rag".into(),
            version: "1.0.0".into(),
            date: "2026-12-01".into(),
            hardware: "cpu × 2 threads".into(),
            models: [("answer".to_string(), "smollm2@abc".to_string())].into(),
            nodes: vec![NodeCalibration {
                id: "answer".into(),
                resource: "gpu".into(),
                calls: 3,
                wall_ms: 900.0,
                cpu_ms: None,
                hourly_usd: 0.1,
                basis: "test".into(),
                cost_per_call: Decimal::from_str("0.000025").unwrap(),
            }],
        }
    }

    #[test]
    fn dates_round_trip_and_age() {
        assert_eq!(days_of("1970-01-01"), Some(0));
        assert_eq!(date_of(days_of("2026-12-01").unwrap()), "2026-12-01");
        assert_eq!(date_of(days_of("2024-02-29").unwrap()), "2024-02-29");
        assert_eq!(days_of("2026-13-01"), None);
        assert_eq!(days_of("soon"), None);
    }

    #[test]
    fn warns_when_old_moved_or_changed() {
        let c = sample();
        let day = days_of("2026-12-01").unwrap();
        let same: BTreeMap<String, String> = c.models.clone();
        assert!(c.warnings(day + 14, &c.hardware, "1.0.0", &same).is_empty());
        let w = c.warnings(day + 15, &c.hardware, "1.0.0", &same);
        assert!(w.len() == 1 && w[0].contains("15 days old"), "{w:?}");
        let w = c.warnings(day, "other box", "1.1.0", &BTreeMap::new());
        assert_eq!(w.len(), 2, "{w:?}");
        let swapped = [("answer".to_string(), "qwen@def".to_string())].into();
        let w = c.warnings(day, &c.hardware, "1.0.0", &swapped);
        assert!(w.len() == 1 && w[0].contains("qwen@def"), "{w:?}");
    }

    #[test]
    fn file_round_trip_next_to_the_topology() {
        assert_eq!(
            path_for(Path::new("/x/rag.yaml")),
            PathBuf::from("/x/rag.calibration.json")
        );
        let dir = std::env::temp_dir().join(format!("gb-cal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let topo = dir.join("rag.yaml");
        assert!(Calibration::find(&topo).is_none());
        let c = sample();
        std::fs::write(path_for(&topo), serde_json::to_string(&c).unwrap()).unwrap();
        let back = Calibration::find(&topo).unwrap().unwrap();
        assert_eq!(back, c);
        assert_eq!(
            back.prices()["answer"].cost_per_call,
            Some(Decimal::from_str("0.000025").unwrap())
        );
        std::fs::write(path_for(&topo), "{\"topology\": 1}").unwrap();
        let err = Calibration::find(&topo).unwrap().unwrap_err();
        assert!(
            err.to_string().contains("re-run `glassbox calibrate`"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
