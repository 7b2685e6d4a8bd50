//! Efficiency factors: how far below the roofline real engines run.
//!
//! A roofline says a decode step cannot beat `bytes / bandwidth` and a prefill
//! cannot beat `FLOPs / peak`; real engines reach a fraction of that plus a
//! fixed cost per step (kernel launches, sampling, scheduling). Those two
//! numbers, an efficiency `η` and an overhead `c`, depend on the hardware
//! class, the engine and the phase, so they are kept per
//! (class, engine, phase) and fitted from measurements
//! ([`crate::calibrate`]). The shipped defaults (`data/efficiency.toml`) are
//! that fit on `data/measurements.csv`; anything without data falls back to
//! a coarser level and finally to the documented priors below.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::engine::{
    Engine, EngineProfile, GRAPH_REPLAY_STEP_OVERHEAD_MS, SCORE_BYTES_PER_ELEMENT, StepLaunch,
    VLLM_FRONTEND_MS_PER_REQUEST, VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS,
};
use crate::error::PlannerError;
use crate::hardware::HardwareClass;
pub use crate::phase::Phase;

const DEFAULTS: &str = include_str!("../data/efficiency.toml");

/// One fitted or prior pair: `time = roofline / efficiency + overhead`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    /// Fraction of the roofline reached (bandwidth for decode, compute for prefill).
    pub efficiency: f64,
    /// Fixed cost per step (decode) or per prefill pass, milliseconds.
    pub overhead_ms: f64,
}

/// A table entry; `*` in `class` or `engine` is a pooled (coarser) level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub class: String,
    pub engine: String,
    pub phase: Phase,
    pub efficiency: f64,
    pub overhead_ms: f64,
    /// Measurements behind the fit (0 for a hand-set value).
    #[serde(default)]
    pub rows: usize,
    /// Whether `overhead_ms` was fitted (true) or inherited from the parent level.
    #[serde(default)]
    pub overhead_fitted: bool,
}

/// A factor together with the level it came from, for explanations.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub factor: Factor,
    pub level: String,
}

/// Documented priors by class and phase (used only when no table level has
/// data). Decode: consumer/datacenter GPUs reach 80-90% of bandwidth in good
/// kernels, Apple ~75%, CPUs and NPUs less; prefill: tensor-core GEMMs reach
/// 50-70% of dense peak end to end.
pub fn prior(class: HardwareClass, phase: Phase) -> Factor {
    let (efficiency, overhead_ms) = match (class, phase) {
        (HardwareClass::Datacenter, Phase::Decode) => (0.80, 4.0),
        (HardwareClass::Consumer, Phase::Decode) => (0.85, 3.0),
        (HardwareClass::Apple, Phase::Decode) => (0.75, 5.0),
        (HardwareClass::Cpu, Phase::Decode) => (0.60, 5.0),
        (HardwareClass::Npu, Phase::Decode) => (0.60, 6.0),
        (HardwareClass::Datacenter, Phase::Prefill) => (0.55, 5.0),
        (HardwareClass::Consumer, Phase::Prefill) => (0.70, 2.0),
        (HardwareClass::Apple, Phase::Prefill) => (0.60, 5.0),
        (HardwareClass::Cpu, Phase::Prefill) => (0.40, 10.0),
        (HardwareClass::Npu, Phase::Prefill) => (0.40, 10.0),
    };
    Factor {
        efficiency,
        overhead_ms,
    }
}

/// Efficiency factors with hierarchical fallback.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EfficiencyTable {
    #[serde(default, rename = "factor")]
    pub entries: Vec<Entry>,
    /// Set for the fixed-constant baseline: every lookup returns these.
    #[serde(skip)]
    constant: Option<(Factor, Factor)>,
}

impl EfficiencyTable {
    /// Whether this is the constant-efficiency baseline (no engine
    /// per-sequence costs: a plain roofline plus a fixed step overhead).
    pub fn is_baseline(&self) -> bool {
        self.constant.is_some()
    }
}

impl EfficiencyTable {
    /// The shipped defaults: the fit on `data/measurements.csv`.
    pub fn defaults() -> Result<Self, PlannerError> {
        Self::from_toml(DEFAULTS, "builtin efficiency.toml")
    }

    /// A table with no entries: priors only.
    pub fn priors_only() -> Self {
        Self::default()
    }

    /// The plain baseline of issue 7: 70% of bandwidth with 3 ms per decode
    /// step, 50% of peak compute, for every class and engine.
    pub fn baseline() -> Self {
        Self {
            entries: vec![],
            constant: Some((
                Factor {
                    efficiency: 0.5,
                    overhead_ms: 0.0,
                },
                Factor {
                    efficiency: 0.7,
                    overhead_ms: 3.0,
                },
            )),
        }
    }

    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PlannerError> {
        let t: Self = toml::from_str(text).map_err(|e| PlannerError::Toml {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        for e in &t.entries {
            let ok = e.efficiency.is_finite()
                && e.efficiency > 0.0
                && e.efficiency <= 2.0
                && e.overhead_ms.is_finite()
                && e.overhead_ms >= 0.0;
            if !ok {
                return Err(PlannerError::invalid(
                    format!(
                        "{origin}: factor {}/{}/{}",
                        e.class,
                        e.engine,
                        e.phase.as_str()
                    ),
                    format!(
                        "efficiency must be in (0, 2] and overhead_ms >= 0, got {} and {}",
                        e.efficiency, e.overhead_ms
                    ),
                ));
            }
        }
        Ok(t)
    }

    pub fn load(path: &Path) -> Result<Self, PlannerError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlannerError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, &path.display().to_string())
    }

    pub fn to_toml(&self) -> Result<String, PlannerError> {
        toml::to_string(self).map_err(|e| PlannerError::Toml {
            origin: "efficiency table".into(),
            message: e.to_string(),
        })
    }

    /// Entries from `other` replace or extend this table's.
    pub fn overlay(&mut self, other: &Self) {
        for e in &other.entries {
            match self
                .entries
                .iter_mut()
                .find(|x| x.class == e.class && x.engine == e.engine && x.phase == e.phase)
            {
                Some(slot) => *slot = e.clone(),
                None => self.entries.push(e.clone()),
            }
        }
    }

    fn find(&self, class: &str, engine: &str, phase: Phase) -> Option<Factor> {
        self.entries
            .iter()
            .find(|e| e.class == class && e.engine == engine && e.phase == phase)
            .map(|e| Factor {
                efficiency: e.efficiency,
                overhead_ms: e.overhead_ms,
            })
    }

    /// The factor for (class, engine, phase): exact entry, else the engine
    /// pooled over classes, else the class pooled over engines, else the
    /// prior. The last two get the engine's prior adjustment and, for an
    /// engine that replays decode steps as CUDA graphs on a GPU, a decode
    /// step overhead of at most [`GRAPH_REPLAY_STEP_OVERHEAD_MS`]
    /// ([`Engine::step_overhead_cap_ms`]): a pooled overhead is other
    /// engines' host cost, not this one's.
    pub fn lookup(&self, class: HardwareClass, engine: Engine, phase: Phase) -> Resolved {
        if let Some((prefill, decode)) = self.constant {
            let factor = if phase == Phase::Prefill {
                prefill
            } else {
                decode
            };
            return Resolved {
                factor,
                level: "baseline constant".into(),
            };
        }
        let (c, e) = (class.as_str(), engine.family().as_str());
        if let Some(f) = self.find(c, e, phase) {
            return Resolved {
                factor: f,
                level: format!("fit {c}/{e}"),
            };
        }
        if let Some(f) = self.find("*", e, phase) {
            return Resolved {
                factor: f,
                level: format!("fit */{e} (no {c} data)"),
            };
        }
        let (k_eff, k_over) = engine.prior_adjust();
        let cap = engine.step_overhead_cap_ms(Some(class), phase);
        let adjust = |f: Factor, level: String| {
            let overhead = f.overhead_ms * k_over;
            let (overhead_ms, level) = match cap {
                Some(cap) if cap < overhead => (cap, format!("{level}, CUDA-graph step prior")),
                _ => (overhead, level),
            };
            Resolved {
                factor: Factor {
                    efficiency: f.efficiency * k_eff,
                    overhead_ms,
                },
                level,
            }
        };
        match self.find(c, "*", phase) {
            Some(f) => adjust(f, format!("fit {c}/* (no {e} data)")),
            None => adjust(prior(class, phase), format!("prior {c}")),
        }
    }
}

#[cfg(test)]
#[path = "efficiency_tests.rs"]
mod tests;
