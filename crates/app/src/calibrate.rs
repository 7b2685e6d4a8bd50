//! `glassbox calibrate`'s work (DESIGN.md, cost model): a topology run
//! here ([`Local`]) `requests` times after one warm-up run, each node's
//! mean wall and CPU time per call taken from its spans, and its
//! `cost_per_call` priced from an hourly price ([`price`]):
//!
//! - `cpu` nodes: CPU-seconds per call × the price of a core-second
//!   (`core_hourly / 3600`); wall time when the node reports no CPU time;
//! - `gpu` nodes: wall seconds per call × the device's price per second ÷
//!   the calls sharing the device at saturation.
//!
//! The result is a dated [`Calibration`] ([`measure`]), written beside the
//! topology ([`write`]), which `run` and `serve` bill from and warn about
//! when it is stale ([`crate::calibration`]).
//!
//! Why here: the measuring and pricing are work a test can call with a
//! real topology and read as values; the command only resolves its flags
//! (the input, the device's price from the planner's catalogue) and prints.

use std::collections::BTreeMap;
use std::path::Path;

use glassbox_engine::RunOptions;
use glassbox_engine::calibration::{
    Calibration, NodeCalibration, date_of, this_machine, today_days,
};
use glassbox_topology::ResourceKind;
use rust_decimal::Decimal;
use serde_json::Value;

use crate::Local;

/// The `gpu` nodes' device: its price for an hour, and where that came
/// from (for each node's `basis`).
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    pub hourly: f64,
    pub basis: String,
}

impl Device {
    /// This machine as the device: all its `cores` at `core_hourly` (a
    /// local model on the CPU holds every core while it runs).
    pub fn this_machine(cores: usize, core_hourly: f64) -> Device {
        Device {
            hourly: cores as f64 * core_hourly,
            basis: format!("this machine: {cores} cores × ${core_hourly}/core-h"),
        }
    }
}

/// How to measure and price.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Runs measured, after one warm-up run.
    pub requests: u32,
    /// Price of one CPU core for an hour, USD.
    pub core_hourly: f64,
    pub device: Device,
    /// Calls sharing one device at saturation (`gpu` nodes).
    pub gpu_concurrency: u32,
}

/// What a calibration measured, beside the calibration itself.
#[derive(Debug, Clone)]
pub struct Measured {
    pub calibration: Calibration,
    /// What the topology's own prices charged per node, over all
    /// measured runs (to compare with the calibrated cost).
    pub charged: BTreeMap<String, Decimal>,
    pub runs: u32,
}

/// Why a calibration could not be made or kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrateError {
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A run failed: a calibration of a failing input would price nothing.
    #[error("run {run} of `{file}` failed: {cause}; calibrate with an input that succeeds")]
    RunFailed {
        run: u32,
        file: String,
        cause: String,
    },
    #[error("cannot write `{path}`: {cause}")]
    Write { path: String, cause: String },
}

impl Plan {
    /// Refuses settings that price nothing or nonsense.
    pub fn check(&self) -> Result<(), CalibrateError> {
        if self.requests == 0 || self.gpu_concurrency == 0 {
            return Err(CalibrateError::Invalid(
                "`--requests` and `--gpu-concurrency` must be at least 1".into(),
            ));
        }
        if !(self.core_hourly.is_finite() && self.core_hourly >= 0.0) {
            return Err(CalibrateError::Invalid(format!(
                "`--core-hourly` must be 0 or more, got {}",
                self.core_hourly
            )));
        }
        Ok(())
    }
}

/// Per node, summed over the measured runs.
#[derive(Default)]
struct Sums {
    calls: u64,
    wall_us: u64,
    cpu_us: u64,
    has_cpu: bool,
}

/// A node's price for one call: the hourly price used, the cost per call
/// (USD), and the basis in words.
pub fn price(
    kind: ResourceKind,
    wall_ms: f64,
    cpu_ms: Option<f64>,
    plan: &Plan,
) -> (f64, f64, String) {
    match kind {
        ResourceKind::Cpu => {
            let ms = cpu_ms.unwrap_or(wall_ms);
            let what = if cpu_ms.is_some() { "CPU" } else { "wall" };
            (
                plan.core_hourly,
                ms * plan.core_hourly / 3.6e6,
                format!("{what} {ms:.3} ms × ${}/core-h", plan.core_hourly),
            )
        }
        ResourceKind::Gpu => (
            plan.device.hourly,
            wall_ms * plan.device.hourly / 3.6e6 / f64::from(plan.gpu_concurrency),
            format!(
                "wall {wall_ms:.3} ms × {} ÷ {} concurrent",
                plan.device.basis, plan.gpu_concurrency
            ),
        ),
    }
}

/// Runs `local` (opened from `file`) once to warm up and `plan.requests`
/// times measured, with `input`, and prices every node the input reaches.
pub fn measure(
    local: &Local,
    file: &str,
    input: &Value,
    plan: &Plan,
) -> Result<Measured, CalibrateError> {
    plan.check()?;
    let topology = local.topology.clone();
    let mut sums: BTreeMap<String, Sums> = BTreeMap::new();
    let mut charged: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut models = BTreeMap::new();
    for i in 0..=plan.requests {
        let outcome = local.run(input.clone(), RunOptions::default());
        if let Err(err) = &outcome.result {
            return Err(CalibrateError::RunFailed {
                run: i,
                file: file.to_owned(),
                cause: err.to_string(),
            });
        }
        if i == 0 {
            continue; // warm-up: caches, lazy loads
        }
        for m in &outcome.trace.record.models {
            let v = m.version.clone().unwrap_or_else(|| m.model.clone());
            models.insert(m.node.to_string(), v);
        }
        for span in &outcome.trace.spans {
            let s = sums.entry(span.node.to_string()).or_default();
            s.calls += 1;
            s.wall_us += span.usage.wall_us;
            if let Some(c) = span.usage.cpu_us {
                s.cpu_us += c;
                s.has_cpu = true;
            }
        }
        for line in &outcome.trace.record.receipt.lines {
            *charged.entry(line.node.to_string()).or_default() += line.amount;
        }
    }
    let mut nodes = Vec::new();
    for node in &topology.nodes {
        let Some(s) = sums.get(&node.id) else {
            continue; // not on the path this input takes
        };
        let calls = s.calls.max(1) as f64;
        let wall_ms = s.wall_us as f64 / 1e3 / calls;
        let cpu_ms = s.has_cpu.then(|| s.cpu_us as f64 / 1e3 / calls);
        let (hourly, cost, basis) = price(node.resource.kind, wall_ms, cpu_ms, plan);
        let cost_per_call = Decimal::try_from(cost)
            .map_err(|e| CalibrateError::Invalid(format!("node `{}`: cost {cost} ({e})", node.id)))?
            .round_dp(12)
            .normalize();
        nodes.push(NodeCalibration {
            id: node.id.clone(),
            resource: node.resource.kind.as_str().into(),
            calls: s.calls,
            wall_ms,
            cpu_ms,
            hourly_usd: hourly,
            basis,
            cost_per_call,
        });
    }
    Ok(Measured {
        calibration: Calibration {
            topology: topology.id.clone(),
            version: topology.version.clone(),
            date: date_of(today_days()),
            hardware: this_machine(),
            models,
            nodes,
        },
        charged,
        runs: plan.requests,
    })
}

/// Writes `calibration` to `path` as pretty JSON.
pub fn write(calibration: &Calibration, path: &Path) -> Result<(), CalibrateError> {
    let failed = |cause: String| CalibrateError::Write {
        path: path.display().to_string(),
        cause,
    };
    let text = serde_json::to_string_pretty(calibration).map_err(|e| failed(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LocalOptions, Record};

    fn plan() -> Plan {
        Plan {
            requests: 2,
            core_hourly: 0.036,
            device: Device {
                hourly: 3.6,
                basis: "L4 at $3.6/h".into(),
            },
            gpu_concurrency: 4,
        }
    }

    #[test]
    fn cpu_nodes_pay_cpu_time_and_gpu_nodes_share_the_device() {
        let p = plan();
        let (h, cost, basis) = price(ResourceKind::Cpu, 20.0, Some(10.0), &p);
        assert_eq!(h, 0.036);
        assert!((cost - 1e-7).abs() < 1e-15, "{cost}");
        assert_eq!(basis, "CPU 10.000 ms × $0.036/core-h");
        let (_, wall, basis) = price(ResourceKind::Cpu, 20.0, None, &p);
        assert!((wall - 2e-7).abs() < 1e-15, "{wall}");
        assert!(basis.starts_with("wall 20.000 ms"), "{basis}");
        let (h, cost, basis) = price(ResourceKind::Gpu, 1000.0, Some(5.0), &p);
        assert_eq!(h, 3.6);
        assert!((cost - 0.00025).abs() < 1e-12, "{cost}");
        assert_eq!(basis, "wall 1000.000 ms × L4 at $3.6/h ÷ 4 concurrent");
        let m = Device::this_machine(2, 0.04);
        assert_eq!(m.hourly, 0.08);
        assert!(m.basis.contains("2 cores"), "{}", m.basis);
    }

    #[test]
    fn settings_that_price_nothing_are_refused() {
        for bad in [
            Plan {
                requests: 0,
                ..plan()
            },
            Plan {
                gpu_concurrency: 0,
                ..plan()
            },
            Plan {
                core_hourly: f64::NAN,
                ..plan()
            },
        ] {
            assert!(
                matches!(bad.check(), Err(CalibrateError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_model_free_topology_is_measured_node_by_node_and_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t.yaml");
        std::fs::write(
            &file,
            "topology_id: t\nversion: 1.2.3\nnodes:\n  - id: hello\n    type: template\n    resource: { type: cpu, cost_per_call: 0.5 }\n    config: { template: 'hi {{ input.question }}' }\n",
        )
        .unwrap();
        let name = file.display().to_string();
        let registry = glassbox_nodes::registry();
        let local = Local::open(
            &name,
            &registry,
            LocalOptions {
                record: Record::Nowhere,
                calibrated: false,
                warn: &|_| {},
            },
        )
        .unwrap();
        let input = serde_json::json!({"question": "you"});
        let m = measure(&local, &name, &input, &plan()).unwrap();
        let c = &m.calibration;
        assert_eq!((c.topology.as_str(), c.version.as_str()), ("t", "1.2.3"));
        assert_eq!(c.nodes.len(), 1);
        let n = &c.nodes[0];
        assert_eq!(
            (n.id.as_str(), n.calls),
            ("hello", 2),
            "warm-up not counted"
        );
        let ms = n.cpu_ms.unwrap_or(n.wall_ms);
        let expected = Decimal::try_from(ms * 0.036 / 3.6e6)
            .unwrap()
            .round_dp(12)
            .normalize();
        assert_eq!(n.cost_per_call, expected);
        assert_eq!(m.charged["hello"], Decimal::new(1, 0), "0.5 a call, twice");
        let out = dir.path().join("t.calibration.json");
        write(c, &out).unwrap();
        let back: Calibration =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(back.nodes[0].cost_per_call, n.cost_per_call);
    }
}
