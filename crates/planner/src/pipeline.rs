//! Whole-pipeline plans: a topology's measured traffic → the machines a
//! target request rate needs, and what it costs.
//!
//! The input is a [`PipelineProfile`]: per node, how many calls a request
//! makes on average (the route distribution), and per call its CPU and wall
//! time and tokens, as stored traces recorded them. [`plan`] scales that to
//! a target rate at peak with headroom:
//!
//! - `cpu` nodes need `calls/s × CPU-seconds per call / (1 − headroom)`
//!   cores (wall time when no CPU time was recorded);
//! - `gpu` nodes whose model the planner knows are sized by
//!   [`crate::workload::size`] from their tokens per call (memory, batch,
//!   replicas, GPUs on the chosen device);
//! - other `gpu` nodes are sized from measured occupancy:
//!   `calls/s × wall-seconds per call / (1 − headroom)` devices.
//!
//! What-ifs change the profile before sizing: a route ratio (the fraction
//! of requests reaching a node), a model swap, a weight format, a
//! prefix-cache hit rate (prompt tokens not computed again).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::PlannerError;
use crate::estimate::Estimator;
use crate::hardware::HardwareCatalogue;
use crate::model::ModelCatalogue;
use crate::parallel::ParallelRequest;
use crate::request::PlanRequest;
use crate::workload::{Pricing, Workload, device_hourly};

const SECONDS_PER_DAY: f64 = 86_400.0;

/// Where a node runs, as its topology tags it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Resource {
    Cpu,
    Gpu,
}

/// One node as the stored traces saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeProfile {
    pub id: String,
    pub kind: String,
    pub resource: Resource,
    /// The topology's `resource.model`.
    pub model: Option<String>,
    /// Fraction of requests that reach this node.
    pub reach: f64,
    /// Calls (attempts) per request that reaches it.
    pub calls_per_visit: f64,
    pub wall_ms_per_call: f64,
    /// `None` when the node recorded no CPU time.
    pub cpu_ms_per_call: Option<f64>,
    pub input_tokens_per_call: f64,
    pub output_tokens_per_call: f64,
}

/// A topology's measured traffic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineProfile {
    pub topology: String,
    /// Requests the profile was measured on.
    pub requests: u64,
    pub nodes: Vec<NodeProfile>,
}

/// Changes to try before sizing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WhatIf {
    /// Node → fraction of requests that reach it (0..=1).
    pub route: BTreeMap<String, f64>,
    /// Node → planner model to serve it with instead.
    pub swap: BTreeMap<String, String>,
    /// Weight format for every sized model.
    pub quant: Option<String>,
    /// Fraction of prompt tokens served from a prefix cache (0..1).
    pub cache_hit: Option<f64>,
}

/// What to size for.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// Average requests per second.
    pub rate: f64,
    pub peak_factor: f64,
    /// Capacity kept free at peak.
    pub headroom: f64,
    /// Device for `gpu` nodes (hardware catalogue id).
    pub gpu: String,
    pub engine: Option<String>,
    /// Price of one CPU core for an hour.
    pub core_hourly_usd: f64,
    /// Node (or topology model name) → planner catalogue model.
    pub model_map: BTreeMap<String, String>,
    pub pricing: Pricing,
}

/// One node's share of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct NodePlan {
    pub id: String,
    pub resource: Resource,
    /// The planner model it was sized as, when it was.
    pub model: Option<String>,
    pub calls_per_s: f64,
    pub cpu_cores: f64,
    pub gpus: u64,
    pub gpu_type: Option<String>,
    pub cost_per_day_usd: f64,
    /// How it was sized, in words.
    pub basis: String,
}

/// The plan of a whole pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct PipelinePlan {
    pub topology: String,
    pub rate: f64,
    pub peak_rate: f64,
    pub nodes: Vec<NodePlan>,
    /// CPU cores in all (rounded up).
    pub cpu_cores: u64,
    /// `model @ device` → GPUs.
    pub gpus: BTreeMap<String, u64>,
    pub cost_per_day_usd: f64,
    pub cost_per_request_usd: f64,
    pub what_if: WhatIf,
}

fn check_fraction(what: &str, v: f64, top_inclusive: bool) -> Result<(), PlannerError> {
    let ok = v.is_finite() && v >= 0.0 && (v < 1.0 || (top_inclusive && v <= 1.0));
    if ok {
        Ok(())
    } else {
        Err(PlannerError::invalid(
            what,
            format!(
                "must be in [0, 1{} , got {v}",
                if top_inclusive { "]" } else { ")" }
            ),
        ))
    }
}

fn validate(p: &PipelineProfile, t: &Target, w: &WhatIf) -> Result<(), PlannerError> {
    if !(t.rate.is_finite() && t.rate > 0.0) {
        return Err(PlannerError::invalid(
            "rate",
            format!("must be above 0, got {}", t.rate),
        ));
    }
    if !(t.peak_factor.is_finite() && t.peak_factor >= 1.0) {
        return Err(PlannerError::invalid(
            "peak factor",
            format!("must be at least 1, got {}", t.peak_factor),
        ));
    }
    check_fraction("headroom", t.headroom, false)?;
    for (node, r) in &w.route {
        if !p.nodes.iter().any(|n| &n.id == node) {
            return Err(PlannerError::invalid(
                "route ratio",
                format!(
                    "no node `{node}` in `{}` (nodes: {})",
                    p.topology,
                    p.nodes
                        .iter()
                        .map(|n| n.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        check_fraction(&format!("route ratio of `{node}`"), *r, true)?;
    }
    for node in w.swap.keys() {
        if !p.nodes.iter().any(|n| &n.id == node) {
            return Err(PlannerError::invalid(
                "model swap",
                format!("no node `{node}` in `{}`", p.topology),
            ));
        }
    }
    if let Some(h) = w.cache_hit {
        check_fraction("cache hit rate", h, false)?;
    }
    if p.requests == 0 {
        return Err(PlannerError::invalid(
            "profile",
            format!(
                "no stored requests of `{}` to learn from; run some first (glassbox run/serve with a store)",
                p.topology
            ),
        ));
    }
    Ok(())
}

/// The planner model a node is served with, if the planner knows it.
fn planner_model(
    n: &NodeProfile,
    t: &Target,
    w: &WhatIf,
    models: &ModelCatalogue,
) -> Option<String> {
    let name = w
        .swap
        .get(&n.id)
        .or_else(|| t.model_map.get(&n.id))
        .or_else(|| n.model.as_ref().and_then(|m| t.model_map.get(m)))
        .cloned()
        .or_else(|| n.model.clone())?;
    models.get(&name).ok().map(|m| m.id.clone())
}

/// Sizes the pipeline for `t` after the what-ifs `w`.
pub fn plan(
    p: &PipelineProfile,
    t: &Target,
    w: &WhatIf,
    est: &Estimator,
    hardware: &HardwareCatalogue,
    models: &ModelCatalogue,
) -> Result<PipelinePlan, PlannerError> {
    validate(p, t, w)?;
    let device = hardware.get(&t.gpu)?;
    let usable = 1.0 - t.headroom;
    let peak = t.rate * t.peak_factor;
    let mut nodes = Vec::new();
    let mut gpus: BTreeMap<String, u64> = BTreeMap::new();
    let mut cores_total = 0.0;
    let mut day_total = 0.0;
    for n in &p.nodes {
        let reach = w.route.get(&n.id).copied().unwrap_or(n.reach);
        let calls_avg = t.rate * reach * n.calls_per_visit;
        let calls_peak = peak * reach * n.calls_per_visit;
        let plan = match n.resource {
            Resource::Cpu => {
                let ms = n.cpu_ms_per_call.unwrap_or(n.wall_ms_per_call);
                let cores = calls_peak * ms / 1e3 / usable;
                cores_total += cores;
                NodePlan {
                    id: n.id.clone(),
                    resource: n.resource,
                    model: None,
                    calls_per_s: calls_avg,
                    cpu_cores: cores,
                    gpus: 0,
                    gpu_type: None,
                    cost_per_day_usd: cores * t.core_hourly_usd * 24.0,
                    basis: format!(
                        "{:.2} calls/s at peak × {} {ms:.3} ms / {usable}",
                        calls_peak,
                        if n.cpu_ms_per_call.is_some() {
                            "CPU"
                        } else {
                            "wall"
                        }
                    ),
                }
            }
            Resource::Gpu => match planner_model(n, t, w, models) {
                Some(model) if calls_avg > 0.0 => {
                    let mut req = PlanRequest::new(model.clone());
                    req.quant = w.quant.clone();
                    req.engine = t.engine.clone();
                    let hit = w.cache_hit.unwrap_or(0.0);
                    let prompt = (n.input_tokens_per_call * (1.0 - hit)).round().max(1.0) as u64;
                    req.prompt_tokens = prompt;
                    req.gen_tokens = n.output_tokens_per_call.round().max(1.0) as u64;
                    // The whole prompt stays in the context, cached part included.
                    req.context =
                        Some((n.input_tokens_per_call.ceil() as u64).max(prompt) + req.gen_tokens);
                    req.workload = Workload {
                        requests_per_day: calls_avg * SECONDS_PER_DAY,
                        peak_factor: t.peak_factor,
                        headroom: t.headroom,
                        pricing: t.pricing,
                        ..Workload::default()
                    };
                    // The smallest tensor-parallel degree the model fits in.
                    let mut tp = 1;
                    let (resolved, sizing) = loop {
                        req.parallel = ParallelRequest::tensor(tp);
                        let resolved = req.resolve(models)?;
                        let split = resolved.parallelism(device)?;
                        match crate::workload::size(
                            est,
                            &resolved.scenario(device, &split),
                            &resolved.workload,
                        ) {
                            Ok(sizing) => break (resolved, sizing),
                            Err(PlannerError::DoesNotFit { .. }) if tp < 8 => tp *= 2,
                            Err(e) => return Err(e),
                        }
                    };
                    *gpus.entry(format!("{model} @ {}", device.id)).or_default() +=
                        sizing.gpus_needed;
                    NodePlan {
                        id: n.id.clone(),
                        resource: n.resource,
                        model: Some(model),
                        calls_per_s: calls_avg,
                        cpu_cores: 0.0,
                        gpus: sizing.gpus_needed,
                        gpu_type: Some(device.id.clone()),
                        cost_per_day_usd: sizing.cost_per_day_usd,
                        basis: format!(
                            "{} in / {} out tokens per call, {} ({}), tp {}, batch {}",
                            prompt,
                            resolved.gen_tokens,
                            resolved.quant.name,
                            resolved.engine,
                            tp,
                            sizing.batch
                        ),
                    }
                }
                _ => {
                    let busy = calls_peak * n.wall_ms_per_call / 1e3 / usable;
                    let g = if calls_avg > 0.0 {
                        busy.ceil().max(1.0) as u64
                    } else {
                        0
                    };
                    let (hour, _) = device_hourly(device, &t.pricing)?;
                    let name = n.model.clone().unwrap_or_else(|| n.kind.clone());
                    if g > 0 {
                        *gpus.entry(format!("{name} @ {}", device.id)).or_default() += g;
                    }
                    NodePlan {
                        id: n.id.clone(),
                        resource: n.resource,
                        model: None,
                        calls_per_s: calls_avg,
                        cpu_cores: 0.0,
                        gpus: g,
                        gpu_type: Some(device.id.clone()),
                        cost_per_day_usd: g as f64 * hour * 24.0,
                        basis: format!(
                            "measured occupancy: {:.2} calls/s at peak × {:.1} ms / {usable} (model `{name}` not in the planner's catalogue; map it with --model-map)",
                            calls_peak, n.wall_ms_per_call
                        ),
                    }
                }
            },
        };
        day_total += plan.cost_per_day_usd;
        nodes.push(plan);
    }
    Ok(PipelinePlan {
        topology: p.topology.clone(),
        rate: t.rate,
        peak_rate: peak,
        nodes,
        cpu_cores: cores_total.ceil() as u64,
        gpus,
        cost_per_day_usd: day_total,
        cost_per_request_usd: day_total / (t.rate * SECONDS_PER_DAY),
        what_if: w.clone(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::efficiency::EfficiencyTable;

    fn profile() -> PipelineProfile {
        let node = |id: &str, resource, model: Option<&str>, reach, cpu: Option<f64>, tin, tout| {
            NodeProfile {
                id: id.into(),
                kind: "k".into(),
                resource,
                model: model.map(Into::into),
                reach,
                calls_per_visit: 1.0,
                wall_ms_per_call: 50.0,
                cpu_ms_per_call: cpu,
                input_tokens_per_call: tin,
                output_tokens_per_call: tout,
            }
        };
        PipelineProfile {
            topology: "rag".into(),
            requests: 100,
            nodes: vec![
                node("route", Resource::Cpu, None, 1.0, Some(2.0), 0.0, 0.0),
                node("embed", Resource::Gpu, Some("minilm"), 0.7, None, 20.0, 0.0),
                node(
                    "llm",
                    Resource::Gpu,
                    Some("llama-3.1-8b"),
                    0.7,
                    None,
                    1500.0,
                    300.0,
                ),
            ],
        }
    }

    fn target() -> Target {
        Target {
            rate: 20.0,
            peak_factor: 2.0,
            headroom: 0.3,
            gpu: "h100-sxm".into(),
            engine: None,
            core_hourly_usd: 0.05,
            model_map: BTreeMap::new(),
            pricing: Pricing::default(),
        }
    }

    fn run(w: &WhatIf) -> PipelinePlan {
        let est = Estimator::new(EfficiencyTable::priors_only());
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        plan(&profile(), &target(), w, &est, &hw, &models).unwrap()
    }

    #[test]
    fn sizes_cpu_gpu_and_unknown_models() {
        let p = run(&WhatIf::default());
        let route = &p.nodes[0];
        // 40 calls/s at peak × 2 ms CPU / 0.7 usable = 0.114 cores.
        assert!((route.cpu_cores - 40.0 * 0.002 / 0.7).abs() < 1e-9);
        let embed = &p.nodes[1];
        // Not in the catalogue: measured occupancy 28/s × 50 ms / 0.7 = 2 GPUs.
        assert_eq!(embed.gpus, 2);
        assert!(embed.basis.contains("--model-map"));
        let llm = &p.nodes[2];
        assert_eq!(llm.model.as_deref(), Some("llama-3.1-8b"));
        assert!(llm.gpus >= 1);
        assert_eq!(p.cpu_cores, 1);
        assert_eq!(p.gpus["llama-3.1-8b @ h100-sxm"], llm.gpus);
        let total: f64 = p.nodes.iter().map(|n| n.cost_per_day_usd).sum();
        assert!((p.cost_per_day_usd - total).abs() < 1e-9);
        assert!((p.cost_per_request_usd - total / (20.0 * 86_400.0)).abs() < 1e-12);
    }

    #[test]
    fn what_ifs_move_the_plan_the_right_way() {
        let base = run(&WhatIf::default());
        let fewer = run(&WhatIf {
            route: [("llm".to_string(), 0.1)].into(),
            ..WhatIf::default()
        });
        assert!(fewer.nodes[2].calls_per_s < base.nodes[2].calls_per_s);
        assert!(fewer.cost_per_day_usd < base.cost_per_day_usd);
        let bigger = run(&WhatIf {
            swap: [("llm".to_string(), "llama-3.1-70b".to_string())].into(),
            ..WhatIf::default()
        });
        assert!(bigger.nodes[2].cost_per_day_usd > base.nodes[2].cost_per_day_usd);
        let q4 = run(&WhatIf {
            quant: Some("int4".into()),
            ..WhatIf::default()
        });
        assert!(q4.nodes[2].basis.contains("int4"));
        let cached = run(&WhatIf {
            cache_hit: Some(0.9),
            ..WhatIf::default()
        });
        assert!(
            cached.nodes[2].basis.starts_with("150 in"),
            "{}",
            cached.nodes[2].basis
        );
        assert!(cached.nodes[2].cost_per_day_usd <= base.nodes[2].cost_per_day_usd);
        // Mapping the embedding model to a catalogue model sizes it by tokens.
        let est = Estimator::new(EfficiencyTable::priors_only());
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let mut t = target();
        t.model_map.insert("minilm".into(), "smollm2-135m".into());
        let mapped = plan(&profile(), &t, &WhatIf::default(), &est, &hw, &models).unwrap();
        assert_eq!(mapped.nodes[1].model.as_deref(), Some("smollm2-135m"));
    }

    #[test]
    fn bad_what_ifs_name_the_node() {
        let est = Estimator::new(EfficiencyTable::priors_only());
        let hw = HardwareCatalogue::builtin().unwrap();
        let models = ModelCatalogue::builtin().unwrap();
        let w = WhatIf {
            route: [("nope".to_string(), 0.5)].into(),
            ..WhatIf::default()
        };
        let err = plan(&profile(), &target(), &w, &est, &hw, &models).unwrap_err();
        assert!(err.to_string().contains("no node `nope`"), "{err}");
        let w = WhatIf {
            route: [("llm".to_string(), 1.5)].into(),
            ..WhatIf::default()
        };
        assert!(plan(&profile(), &target(), &w, &est, &hw, &models).is_err());
        let mut empty = profile();
        empty.requests = 0;
        let err = plan(&empty, &target(), &WhatIf::default(), &est, &hw, &models).unwrap_err();
        assert!(err.to_string().contains("no stored requests"), "{err}");
    }
}
