//! `glassbox plan pipeline TOPOLOGY --rate R`: what a whole pipeline needs.
//!
//! The topology gives the nodes and their resource tags; its stored traces
//! (`--store`, the most recent `--traces` requests) give, per node, the
//! fraction of requests that reach it, attempts per visit, wall and CPU
//! time and tokens per call; for an `agent` node, its model calls (its
//! `step` spans): iterations per request and tokens per model call.
//! `glassbox_planner::pipeline::plan` scales
//! that to the target rate with the what-ifs applied; this module gathers
//! the profile and prints the plan.
//!
//! With `--discovered`, the argument is the id of a topology known only
//! from its stored requests (ingested over OTLP): its nodes are the steps
//! those requests ran, each sized as its kind suggests (model calls and
//! embeddings on `gpu` with the model they recorded, the rest on `cpu`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use glassbox_planner::pipeline::{
    self, NodeProfile, PipelinePlan, PipelineProfile, Resource, Target, WhatIf,
};
use glassbox_planner::request::{self, defaults};
use glassbox_planner::workload::Pricing;
use glassbox_planner::{Estimator, ModelCatalogue};
use glassbox_store::{Filter, ListQuery, Sort};
use glassbox_topology::ResourceKind;
use glassbox_trace::RequestId;

use super::errors::{invalid, usage};
use super::output::print_table;
use crate::cmd::common::{OutputFormat, topology_error};
use crate::cmd::store::{StoreArg, store_error};

#[derive(Debug, clap::Args)]
pub struct PipelineArgs {
    /// Topology file (JSON or YAML) whose stored traces to plan from; with
    /// `--discovered`, a topology id in the store.
    pub file: String,
    /// FILE is the id of a discovered topology (`{service.name}/{root span}`
    /// for traces ingested over OTLP), planned from its stored requests.
    #[arg(long)]
    pub discovered: bool,
    #[command(flatten)]
    pub store: StoreArg,
    /// Target requests per second (average).
    #[arg(long)]
    pub rate: f64,
    /// Most recent stored requests to learn from.
    #[arg(long, default_value_t = 1000)]
    pub traces: u32,
    /// Device for `gpu` nodes (`glassbox plan list-gpus`).
    #[arg(long, default_value = "h100-sxm")]
    pub gpu: String,
    /// Engine the models are served with (default: vllm).
    #[arg(long)]
    pub engine: Option<String>,
    /// Price of one CPU core for an hour, USD.
    #[arg(long, default_value_t = 0.04)]
    pub core_hourly: f64,
    /// Price per GPU-hour (overrides the catalogue).
    #[arg(long)]
    pub price_per_hour: Option<f64>,
    #[arg(long, default_value_t = defaults::PEAK_FACTOR)]
    pub peak_factor: f64,
    /// Capacity kept free at peak.
    #[arg(long, default_value_t = defaults::HEADROOM)]
    pub headroom: f64,
    /// NODE_OR_MODEL=PLANNER_MODEL: size a topology model as a catalogue model (repeatable).
    #[arg(long, value_name = "NAME=MODEL")]
    pub model_map: Vec<String>,
    /// What-if NODE=FRACTION: the fraction of requests that reach NODE (repeatable).
    #[arg(long, value_name = "NODE=FRACTION")]
    pub route: Vec<String>,
    /// What-if NODE=MODEL: serve NODE with another catalogue model (repeatable).
    #[arg(long, value_name = "NODE=MODEL")]
    pub swap: Vec<String>,
    /// What-if: weight format for every sized model (fp16, fp8, int4, q4_k_m, ...).
    #[arg(long)]
    pub quant: Option<String>,
    /// What-if: fraction of prompt tokens served from a prefix cache.
    #[arg(long)]
    pub cache_hit: Option<f64>,
    #[arg(long)]
    pub hardware_file: Option<PathBuf>,
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

fn pairs(flag: &str, items: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    items
        .iter()
        .map(|s| {
            s.split_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| usage(&format!("`--{flag} {s}`: write NAME=VALUE")))
        })
        .collect()
}

#[derive(Default)]
struct Seen {
    /// First seen (order of the discovered nodes), kind and model.
    order: usize,
    kind: String,
    model: Option<String>,
    visits: u64,
    calls: u64,
    wall_us: u64,
    cpu_us: u64,
    has_cpu: bool,
    input: u64,
    output: u64,
    /// An agent's model calls (its `step` spans of kind `*.model`): the
    /// work its model serves, one per loop iteration.
    model_steps: u64,
    step_wall_us: u64,
    step_input: u64,
    step_output: u64,
}

/// The topology's measured traffic, from its most recent stored traces.
fn profile(a: &PipelineArgs) -> anyhow::Result<PipelineProfile> {
    let topology = if a.discovered {
        None
    } else {
        let registry = glassbox_nodes::registry();
        let validated =
            glassbox_topology::load_path(&a.file, &registry.kind_set()).map_err(topology_error)?;
        Some(validated.topology)
    };
    let topology_id = topology.as_ref().map_or(a.file.clone(), |t| t.id.clone());
    let mut store = a.store.open()?;
    let query = ListQuery {
        filter: Filter {
            topology: Some(topology_id.clone()),
            ..Filter::default()
        },
        sort: Sort::Recent,
        limit: a.traces.max(1),
    };
    let listed = store.list(&query).map_err(store_error)?;
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    let mut requests = 0u64;
    for summary in &listed {
        let Ok(id) = RequestId::from_str(&summary.request_id) else {
            continue;
        };
        let Some(trace) = store.get(id).map_err(store_error)? else {
            continue;
        };
        requests += 1;
        let mut visited = BTreeSet::new();
        for span in &trace.spans {
            if let Some(of) = span.role.step_of() {
                if span.kind.ends_with(".model") {
                    let s = seen.entry(of.to_string()).or_default();
                    s.model_steps += 1;
                    s.step_wall_us += span.usage.wall_us;
                    s.step_input += span.usage.input_tokens.unwrap_or(0);
                    s.step_output += span.usage.output_tokens.unwrap_or(0);
                }
                continue;
            }
            let order = seen.len();
            let s = seen.entry(span.node.to_string()).or_insert_with(|| Seen {
                order,
                kind: span.kind.to_string(),
                model: span.tags.get("model").cloned(),
                ..Seen::default()
            });
            if visited.insert(span.node.to_string()) {
                s.visits += 1;
            }
            s.calls += 1;
            s.wall_us += span.usage.wall_us;
            if let Some(c) = span.usage.cpu_us {
                s.cpu_us += c;
                s.has_cpu = true;
            }
            s.input += span.usage.input_tokens.unwrap_or(0);
            s.output += span.usage.output_tokens.unwrap_or(0);
        }
    }
    // The nodes to size: the file's, or (discovered) those seen, in the
    // order first seen, on the resource their kind suggests.
    let declared: Vec<(String, String, Resource, Option<String>)> = match &topology {
        Some(t) => t
            .nodes
            .iter()
            .map(|n| {
                let resource = match n.resource.kind {
                    ResourceKind::Cpu => Resource::Cpu,
                    ResourceKind::Gpu => Resource::Gpu,
                };
                (
                    n.id.clone(),
                    n.kind.clone(),
                    resource,
                    n.resource.model.clone(),
                )
            })
            .collect(),
        None => {
            if requests == 0 {
                return Err(crate::exit::Coded::invalid(format!(
                    "no stored requests of topology `{topology_id}` (hint: `glassbox trace list` shows the topology ids stored; ingested ones are `{{service.name}}/{{root span}}`)"
                )));
            }
            let mut seen_nodes: Vec<(&String, &Seen)> = seen.iter().collect();
            seen_nodes.sort_by_key(|(_, s)| s.order);
            seen_nodes
                .into_iter()
                .map(|(id, s)| {
                    let on_gpu = matches!(s.kind.as_str(), "llm_inference" | "embedding")
                        && s.model.is_some();
                    let resource = if on_gpu { Resource::Gpu } else { Resource::Cpu };
                    (id.clone(), s.kind.clone(), resource, s.model.clone())
                })
                .collect()
        }
    };
    let nodes = declared
        .into_iter()
        .map(|(id, kind, resource, model)| {
            let mut s = seen.remove(&id).unwrap_or_default();
            // An agent's model is called once per iteration: it is sized
            // by iterations per request and tokens per model call.
            if s.model_steps > 0 {
                s.calls = s.model_steps;
                s.wall_us = s.step_wall_us;
                s.input = s.step_input;
                s.output = s.step_output;
            }
            let calls = s.calls.max(1) as f64;
            NodeProfile {
                id,
                kind,
                resource,
                model,
                reach: if requests == 0 {
                    0.0
                } else {
                    s.visits as f64 / requests as f64
                },
                calls_per_visit: if s.visits == 0 {
                    1.0
                } else {
                    s.calls as f64 / s.visits as f64
                },
                wall_ms_per_call: s.wall_us as f64 / 1e3 / calls,
                cpu_ms_per_call: s.has_cpu.then(|| s.cpu_us as f64 / 1e3 / calls),
                input_tokens_per_call: s.input as f64 / calls,
                output_tokens_per_call: s.output as f64 / calls,
            }
        })
        .collect();
    Ok(PipelineProfile {
        topology: topology_id,
        requests,
        nodes,
    })
}

pub fn run(a: PipelineArgs) -> anyhow::Result<ExitCode> {
    let profile = profile(&a)?;
    let what_if = WhatIf {
        route: pairs("route", &a.route)?
            .into_iter()
            .map(|(k, v)| {
                v.parse::<f64>().map(|f| (k.clone(), f)).map_err(|_| {
                    usage(&format!("`--route {k}={v}`: the fraction must be a number"))
                })
            })
            .collect::<anyhow::Result<_>>()?,
        swap: pairs("swap", &a.swap)?,
        quant: a.quant.clone(),
        cache_hit: a.cache_hit,
    };
    let target = Target {
        rate: a.rate,
        peak_factor: a.peak_factor,
        headroom: a.headroom,
        gpu: a.gpu.clone(),
        engine: a.engine.clone(),
        core_hourly_usd: a.core_hourly,
        model_map: pairs("model-map", &a.model_map)?,
        pricing: Pricing {
            hourly_usd: a.price_per_hour,
            ..Pricing::default()
        },
    };
    let hw = request::hardware_catalogue(a.hardware_file.as_deref()).map_err(invalid)?;
    let models = ModelCatalogue::builtin().map_err(invalid)?;
    let est = Estimator::new(request::efficiency_table(a.calibration.as_deref()).map_err(invalid)?);
    let plan = pipeline::plan(&profile, &target, &what_if, &est, &hw, &models).map_err(invalid)?;
    match a.format {
        OutputFormat::Json => out!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "profile": profile, "plan": plan,
            }))?
        ),
        OutputFormat::Table => print(&profile, &plan),
    }
    Ok(ExitCode::SUCCESS)
}

fn print(profile: &PipelineProfile, plan: &PipelinePlan) {
    out!(
        "{}: {} req/s (peak {}), learned from {} stored requests",
        plan.topology,
        plan.rate,
        plan.peak_rate,
        profile.requests
    );
    for p in profile.nodes.iter().filter(|p| p.kind == "agent") {
        out!(
            "{}: {:.1} model calls (loop iterations) per request, {:.0} tokens in and {:.0} out per call",
            p.id,
            p.calls_per_visit,
            p.input_tokens_per_call,
            p.output_tokens_per_call
        );
    }
    let rows = plan
        .nodes
        .iter()
        .zip(&profile.nodes)
        .map(|(n, p)| {
            vec![
                n.id.clone(),
                match n.resource {
                    Resource::Cpu => "cpu".into(),
                    Resource::Gpu => "gpu".into(),
                },
                format!("{:.0}%", p.reach * 100.0),
                format!("{:.2}", n.calls_per_s),
                format!("{:.1}", p.wall_ms_per_call),
                if n.cpu_cores > 0.0 {
                    format!("{:.2}", n.cpu_cores)
                } else {
                    "-".into()
                },
                if n.gpus > 0 {
                    format!("{} × {}", n.gpus, n.gpu_type.clone().unwrap_or_default())
                } else {
                    "-".into()
                },
                format!("${:.2}", n.cost_per_day_usd),
                n.basis.clone(),
            ]
        })
        .collect();
    print_table(
        &[
            "node", "resource", "reach", "calls/s", "wall ms", "cores", "GPUs", "$/day", "basis",
        ],
        rows,
    );
    let gpus: Vec<String> = plan
        .gpus
        .iter()
        .map(|(k, v)| format!("{v} × {k}"))
        .collect();
    out!(
        "\ntotal: {} CPU cores, GPUs: {}; ${:.2}/day, ${:.6} per request",
        plan.cpu_cores,
        if gpus.is_empty() {
            "none".into()
        } else {
            gpus.join(", ")
        },
        plan.cost_per_day_usd,
        plan.cost_per_request_usd
    );
}
