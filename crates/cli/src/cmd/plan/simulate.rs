//! `glassbox plan --rate R --sla-ttft-p99 MS ...`: size by simulation.
//!
//! The flags become a [`Traffic`] (arrivals, lengths, profile), engine
//! [`Limits`] (KV capacity from the estimator) and a [`SlaP99`];
//! `glassbox_planner::sim::search` finds the fewest replicas whose simulated
//! P99s meet it, and this module prints every count it tried. Stored traces
//! can drive the arrivals (`--arrivals replay`): their start times, rescaled
//! to `--rate`.

use std::process::ExitCode;

use glassbox_planner::request::ResolvedRequest;
use glassbox_planner::sim::search::{self, Search};
use glassbox_planner::sim::{
    self, Arrivals, EstimatorCost, Lengths, Limits, Profile, SimReport, SlaP99, Traffic,
};
use glassbox_planner::workload::hourly;
use glassbox_planner::{Estimator, Hardware};
use glassbox_store::Filter;
use serde_json::json;

use super::errors::{invalid, usage};
use super::output::print_table;
use crate::cmd::common::OutputFormat;
use crate::cmd::store::StoreArg;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrivalKind {
    /// Independent users (exponential gaps).
    Poisson,
    /// Gamma gaps with coefficient of variation `--burstiness`.
    Gamma,
    /// Bursts: `--burst-on-s` of traffic, `--burst-off-s` of none, same mean rate.
    OnOff,
    /// The start times of stored traces (`--store`, `--replay-topology`), rescaled to `--rate`.
    Replay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LengthKind {
    /// Uniform from --prompt-tokens / --gen-tokens up to the `--*-max` flag
    /// (fixed without one).
    Uniform,
    /// Chat-like long tail: --prompt-tokens / --gen-tokens are the means,
    /// lengths run from 1 up to the `--*-max` flag (default 16 × the mean)
    /// with an exponential tail.
    Exponential,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileKind {
    /// One request per task; SLA on TTFT/TPOT/E2E.
    Chat,
    /// Loops of calls per task (`--agent-iterations`, `--agent-cap`); E2E per task.
    Agent,
    /// Prompts sharing a cached prefix (`--prefix-hit`).
    Coding,
    /// Long video / batch: a deadline (`--deadline-s`) instead of TTFT.
    Async,
}

/// Flags of the simulation; `--rate` turns it on.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "SLA sizing by simulation (P99)")]
pub struct SimArgs {
    /// Simulate at this many requests (tasks) per second and find the fewest GPUs meeting the P99 SLA.
    #[arg(long, value_name = "REQ_PER_S")]
    pub rate: Option<f64>,
    /// SLA: P99 time to first token, ms (simulated).
    #[arg(long, value_name = "MS", value_parser = super::args::positive_ms)]
    pub sla_ttft_p99: Option<f64>,
    /// SLA: P99 time per output token, ms (simulated).
    #[arg(long, value_name = "MS", value_parser = super::args::positive_ms)]
    pub sla_tpot_p99: Option<f64>,
    /// SLA: P99 end-to-end latency per task, ms (simulated).
    #[arg(long, value_name = "MS", value_parser = super::args::positive_ms)]
    pub sla_e2e_p99: Option<f64>,
    #[arg(long, value_enum, default_value_t = ArrivalKind::Poisson)]
    pub arrivals: ArrivalKind,
    /// Gamma arrivals: coefficient of variation of the gaps (1 = Poisson).
    #[arg(long, default_value_t = 2.0)]
    pub burstiness: f64,
    #[arg(long, default_value_t = 10.0)]
    pub burst_on_s: f64,
    #[arg(long, default_value_t = 20.0)]
    pub burst_off_s: f64,
    /// Replay: the topology whose stored traces give the arrival times.
    #[arg(long)]
    pub replay_topology: Option<String>,
    #[command(flatten)]
    pub store: StoreArg,
    /// Prompts uniform between --prompt-tokens and this (default: all --prompt-tokens);
    /// with `--lengths exponential`, the longest prompt.
    #[arg(long)]
    pub prompt_tokens_max: Option<u64>,
    /// Outputs uniform between --gen-tokens and this (default: all --gen-tokens);
    /// with `--lengths exponential`, the longest output.
    #[arg(long)]
    pub gen_tokens_max: Option<u64>,
    /// How prompt and output lengths vary in the simulation.
    #[arg(long, value_enum, default_value_t = LengthKind::Uniform)]
    pub lengths: LengthKind,
    #[arg(long, value_enum, default_value_t = ProfileKind::Chat)]
    pub profile: ProfileKind,
    /// Agent: mean calls per task.
    #[arg(long, default_value_t = 4.0)]
    pub agent_iterations: f64,
    /// Agent: most calls per task.
    #[arg(long, default_value_t = 10)]
    pub agent_cap: u32,
    /// Agent: tool time between calls, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub agent_tool_s: f64,
    /// Agent: tokens a tool result adds to the next prompt.
    #[arg(long, default_value_t = 200)]
    pub agent_tool_tokens: u64,
    /// Coding: fraction of prompt tokens served from the prefix cache.
    #[arg(long, default_value_t = 0.5)]
    pub prefix_hit: f64,
    /// Async: each task must finish within this many seconds of arriving.
    #[arg(long, default_value_t = 600.0)]
    pub deadline_s: f64,
    /// Engine: most sequences running at once per replica (default: the
    /// engine's own default on this GPU, e.g. vLLM 256, or 1024 on 70 GiB
    /// cards other than the A100; unlimited where only KV memory caps it)
    #[arg(long)]
    pub max_running: Option<u32>,
    /// Engine: most tokens computed in one step, the chunked-prefill budget
    /// (default: the engine's own on this GPU, e.g. vLLM 2048, or 8192 on
    /// 70 GiB cards other than the A100)
    #[arg(long)]
    pub max_batched_tokens: Option<u32>,
    /// Tasks to simulate (the first 10% are warm-up).
    #[arg(long, default_value_t = sim::TASKS)]
    pub sim_requests: usize,
    /// Seed of the simulated arrivals and lengths.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Most GPUs to search.
    #[arg(long, default_value_t = 1024)]
    pub max_gpus: u32,
}

impl SimArgs {
    /// Whether any simulation flag asks for a simulation.
    pub fn wanted(&self) -> bool {
        self.rate.is_some()
            || self.sla_ttft_p99.is_some()
            || self.sla_tpot_p99.is_some()
            || self.sla_e2e_p99.is_some()
    }

    fn profile(&self) -> Profile {
        match self.profile {
            ProfileKind::Chat => Profile::Chat,
            ProfileKind::Agent => Profile::Agent {
                mean_iterations: self.agent_iterations,
                cap: self.agent_cap,
                tool_s: self.agent_tool_s,
                tool_tokens: self.agent_tool_tokens,
            },
            ProfileKind::Coding => Profile::Coding {
                prefix_hit: self.prefix_hit,
            },
            ProfileKind::Async => Profile::Async {
                deadline_s: self.deadline_s,
            },
        }
    }

    fn arrivals(&self, rate: f64) -> anyhow::Result<Arrivals> {
        Ok(match self.arrivals {
            ArrivalKind::Poisson => Arrivals::Poisson { rate },
            ArrivalKind::Gamma => Arrivals::Gamma {
                rate,
                cv: self.burstiness,
            },
            ArrivalKind::OnOff => Arrivals::OnOff {
                rate,
                on_s: self.burst_on_s,
                off_s: self.burst_off_s,
            },
            ArrivalKind::Replay => {
                let topology = self.replay_topology.clone().ok_or_else(|| {
                    usage("`--arrivals replay` needs `--replay-topology ID` (and `--store URL`)")
                })?;
                let mut store = self.store.open()?;
                let filter = Filter {
                    topology: Some(topology.clone()),
                    ..Filter::default()
                };
                let mut times = Vec::new();
                store
                    .scan_requests(&filter, &mut |f| times.push(f.started_at_us as f64 / 1e6))
                    .map_err(crate::cmd::store::store_error)?;
                Arrivals::replay_at(times, rate)
                    .map_err(|e| invalid(e).context(format!("replaying topology `{topology}`")))?
            }
        })
    }

    fn lengths(&self, tokens: u64, max: Option<u64>, flag: &str) -> anyhow::Result<Lengths> {
        Ok(match self.lengths {
            LengthKind::Uniform => match max {
                Some(hi) if hi > tokens => Lengths::Uniform { lo: tokens, hi },
                _ => Lengths::Fixed(tokens),
            },
            LengthKind::Exponential => {
                let hi = max.unwrap_or(tokens.saturating_mul(16));
                Lengths::exponential(1, hi, tokens as f64, flag)
                    .map_err(|e| invalid(e).context("`--lengths exponential`"))?
            }
        })
    }

    pub fn sla(&self) -> SlaP99 {
        SlaP99 {
            ttft_ms: self.sla_ttft_p99,
            tpot_ms: self.sla_tpot_p99,
            e2e_ms: self.sla_e2e_p99,
        }
    }
}

/// Simulates `r` on `hw` and prints the search.
pub fn run(
    a: &SimArgs,
    r: &ResolvedRequest,
    est: &Estimator,
    hw: &Hardware,
    format: OutputFormat,
) -> anyhow::Result<ExitCode> {
    let rate = a
        .rate
        .ok_or_else(|| usage("the P99 SLA flags size by simulation: give `--rate REQ_PER_S`"))?;
    let profile = a.profile();
    let sla = a.sla();
    if sla.for_profile(&profile).is_empty() {
        return Err(usage(
            "`--rate` sizes by simulation against a P99 target: give `--sla-ttft-p99 MS`, `--sla-tpot-p99 MS` or `--sla-e2e-p99 MS` (or `--profile async`)",
        ));
    }
    let traffic = Traffic {
        arrivals: a.arrivals(rate)?,
        prompt: a.lengths(r.prompt_tokens, a.prompt_tokens_max, "--prompt-tokens")?,
        output: a.lengths(r.gen_tokens, a.gen_tokens_max, "--gen-tokens")?,
        profile,
        tasks: a.sim_requests,
        seed: a.seed,
    };
    let split = r.parallelism(hw).map_err(invalid)?;
    let scenario = r.scenario(hw, &split);
    let (hour, basis) = hourly(&scenario, &r.workload.pricing).map_err(invalid)?;
    let cost = EstimatorCost::new(est, scenario);
    let engine = r.engine.profile(hw);
    let limits = Limits {
        max_running: a
            .max_running
            .unwrap_or(engine.max_running.unwrap_or(u32::MAX)),
        max_batched_tokens: a.max_batched_tokens.unwrap_or(engine.max_batched_tokens),
        ..Limits::with_kv_tokens(cost.kv_tokens())
    };
    let per_replica = split.per_replica().max(1);
    let max_replicas = (a.max_gpus / per_replica).max(1);
    let found =
        search::fewest_replicas(&cost, limits, &traffic, sla, max_replicas).map_err(invalid)?;
    let tp = per_replica;
    match format {
        OutputFormat::Json => {
            let doc = json!({
                "model": r.model.spec.name,
                "gpu": hw.id,
                "tp": split.tp,
                "pp": split.pp,
                "rate": rate,
                "profile": profile.name(),
                "sla_p99": sla.for_profile(&profile),
                "limits": limits,
                "gpus_needed": found.best.as_ref().map(|b| b.replicas * tp),
                "hourly_usd_per_gpu": hour,
                "price_basis": basis,
                "best": found.best,
                "tried": found.tried,
            });
            out!("{}", serde_json::to_string_pretty(&doc)?);
        }
        OutputFormat::Table => print(&found, r, hw, tp, rate, hour, &basis, &limits),
    }
    Ok(ExitCode::SUCCESS)
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn row(s: &SimReport, tp: u32) -> Vec<String> {
    vec![
        (s.replicas * tp).to_string(),
        s.replicas.to_string(),
        ms(s.ttft_ms.p50),
        ms(s.ttft_ms.p95),
        ms(s.ttft_ms.p99),
        ms(s.tpot_ms.p99),
        ms(s.e2e_ms.p99),
        format!("{:.2}", s.goodput_per_s),
        format!("{:.0}%", s.utilisation * 100.0),
        s.preemptions.to_string(),
        if s.meets_sla { "yes" } else { "no" }.into(),
    ]
}

#[allow(clippy::too_many_arguments)]
fn print(
    found: &Search,
    r: &ResolvedRequest,
    hw: &Hardware,
    tp: u32,
    rate: f64,
    hour: f64,
    basis: &str,
    limits: &Limits,
) {
    out!(
        "{} on {} (tp {tp}), {} req/s, simulated: KV {} blocks × {} tokens, {}, {}",
        r.model.spec.name,
        hw.id,
        rate,
        limits.kv_blocks,
        limits.block_tokens,
        if limits.max_running == u32::MAX {
            "running as many as the KV cache holds".to_string()
        } else {
            format!("≤ {} running", limits.max_running)
        },
        if limits.max_batched_tokens == u32::MAX {
            "whole prompts per step".to_string()
        } else {
            format!("{} tokens/step", limits.max_batched_tokens)
        },
    );
    print_table(
        &[
            "GPUs",
            "replicas",
            "TTFT p50",
            "TTFT p95",
            "TTFT p99",
            "TPOT p99",
            "E2E p99",
            "goodput/s",
            "util",
            "preempt",
            "SLA",
        ],
        found.tried.iter().map(|s| row(s, tp)).collect(),
    );
    match &found.best {
        Some(b) => {
            let gpus = b.replicas * tp;
            let per_hour = f64::from(gpus) * hour;
            out!(
                "\nfewest GPUs meeting the P99 SLA: {gpus} × {} ({} replica{}), ${per_hour:.2}/h, ${:.5} per request ({basis})",
                hw.id,
                b.replicas,
                if b.replicas == 1 { "" } else { "s" },
                per_hour / 3600.0 / rate.max(1e-12)
            );
        }
        None => {
            out!("\nno count up to --max-gpus meets the P99 SLA; raise --max-gpus or relax the SLA")
        }
    }
}
