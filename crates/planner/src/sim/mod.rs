//! SLA sizing by simulation: a discrete-event simulator of a serving engine.
//!
//! The closed-form sizing in [`crate::workload`] works with averages; an SLA
//! at P99 needs the queue. This module simulates replicas of one engine
//! (continuous batching, chunked prefill under a per-step token budget, KV
//! capacity in blocks, a cap on running sequences, preemption by recompute
//! when the KV cache runs out) under an arrival process and length
//! distributions, and reports TTFT/TPOT/E2E percentiles and goodput.
//! [`search::fewest_replicas`] finds the fewest replicas whose P99s meet an
//! SLA.
//!
//! - [`cost`]: step durations, from the planner's estimator ([`EstimatorCost`])
//!   or from step times measured on the engine itself ([`ProfiledCost`]).
//! - [`arrivals`]: Poisson, gamma, on/off and replayed arrivals; lengths.
//! - [`profile`]: chat, agent, coding and async workloads (seed 001).
//! - `engine`: the event loop and scheduler.
//!
//! Runs are deterministic: the same inputs and seed give the same report.

pub mod arrivals;
pub mod cost;
mod engine;
mod limits;
pub mod profile;
pub mod search;
mod stats;
#[cfg(test)]
mod tests;

use serde::Serialize;

pub use arrivals::{Arrivals, Lengths};
pub use cost::{EstimatorCost, ProfiledCost, Step, StepCost, StepProfile};
pub use profile::Profile;
pub use stats::{Percentiles, SimReport, nearest_rank};

use crate::error::PlannerError;
use engine::{Call, Sim};
pub use limits::{BLOCK_TOKENS, Limits, MAX_BATCHED_TOKENS, MAX_RUNNING};

/// Tasks simulated when not given.
pub const TASKS: usize = 2000;
/// Fraction of tasks left out of the figures at the start (empty engine).
pub const WARMUP_FRACTION: f64 = 0.1;

/// Latency targets at P99, milliseconds; `None` = no target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SlaP99 {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// Per task (all calls of an agent task; queueing included).
    pub e2e_ms: Option<f64>,
}

impl SlaP99 {
    /// The targets a profile is judged by: async work has a deadline on
    /// E2E and no TTFT target.
    pub fn for_profile(self, profile: &Profile) -> Self {
        match profile.deadline_s() {
            Some(d) => Self {
                ttft_ms: None,
                tpot_ms: None,
                e2e_ms: Some(self.e2e_ms.map_or(d * 1e3, |e| e.min(d * 1e3))),
            },
            None => self,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none()
    }
}

/// The traffic to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// When tasks arrive (an agent task's later calls follow its earlier ones).
    pub arrivals: Arrivals,
    pub prompt: Lengths,
    pub output: Lengths,
    pub profile: Profile,
    /// Tasks to simulate (a replay gives at most its own count).
    pub tasks: usize,
    pub seed: u64,
}

impl Traffic {
    pub fn validate(&self) -> Result<(), PlannerError> {
        self.arrivals.validate()?;
        self.prompt.validate("prompt tokens")?;
        self.output.validate("output tokens")?;
        self.profile.validate()?;
        if self.tasks < 10 {
            return Err(PlannerError::invalid(
                "simulated requests",
                format!("need at least 10 for percentiles, got {}", self.tasks),
            ));
        }
        Ok(())
    }
}

/// One task: its calls in order.
struct Task {
    arrival: f64,
    prompt: u64,
    output: u64,
    iterations: u32,
    /// Calls made so far.
    made: u32,
    calls: Vec<usize>,
}

/// A task's first call, arriving with the task.
fn first_call(profile: &Profile, id: usize, t: &Task) -> Call {
    let prompt = profile.prompt_of_call(t.prompt, t.output, 0);
    Call::new(
        id,
        t.arrival,
        prompt,
        t.output,
        profile.cached_tokens(prompt),
    )
}

/// Simulates `traffic` on `replicas` replicas and judges it against `sla`.
pub fn simulate(
    cost: &dyn StepCost,
    limits: Limits,
    traffic: &Traffic,
    replicas: u32,
    sla: SlaP99,
) -> Result<SimReport, PlannerError> {
    limits.validate()?;
    traffic.validate()?;
    if replicas == 0 {
        return Err(PlannerError::invalid("replicas", "must be at least 1"));
    }
    let sla = sla.for_profile(&traffic.profile);
    let profile = traffic.profile;
    let mut rng = fastrand::Rng::with_seed(traffic.seed);
    let times = traffic.arrivals.times(traffic.tasks, &mut rng);
    let mut tasks: Vec<Task> = times
        .iter()
        .map(|&t| Task {
            arrival: t,
            prompt: traffic.prompt.draw(&mut rng),
            output: traffic.output.draw(&mut rng),
            iterations: profile.iterations(&mut rng),
            made: 1,
            calls: Vec::new(),
        })
        .collect();
    let mut sim = Sim::new(cost, limits, replicas);
    // A closed loop sends only `users` tasks at first; each finished task
    // releases the next one at the moment it finished.
    let first_wave = traffic
        .arrivals
        .users()
        .map_or(tasks.len(), |u| u.min(tasks.len()));
    for (i, t) in tasks.iter().enumerate().take(first_wave) {
        sim.submit(first_call(&profile, i, t));
    }
    {
        let tasks_ref = &mut tasks;
        let mut released = first_wave;
        let mut next = |done: &Call| -> Option<Call> {
            let t = &mut tasks_ref[done.task];
            if !done.rejected && t.made < t.iterations {
                let i = t.made;
                t.made += 1;
                let prompt = profile.prompt_of_call(t.prompt, t.output, i);
                let at = done.finish.unwrap_or(done.arrival) + profile.gap_s();
                return Some(Call::new(
                    done.task,
                    at,
                    prompt,
                    t.output,
                    profile.cached_tokens(prompt),
                ));
            }
            // The task is over (finished, or a call could never fit).
            let j = released;
            let task = tasks_ref.get_mut(j)?;
            released += 1;
            task.arrival = done.finish.unwrap_or(done.arrival);
            Some(first_call(&profile, j, task))
        };
        sim.run(&mut next)?;
    }
    // Calls are numbered in submission order, so each task's are in order.
    for (id, c) in sim.calls.iter().enumerate() {
        tasks[c.task].calls.push(id);
    }
    Ok(report(&sim, &tasks, traffic, replicas, sla))
}

fn report(sim: &Sim, tasks: &[Task], traffic: &Traffic, replicas: u32, sla: SlaP99) -> SimReport {
    let warmup = ((tasks.len() as f64) * WARMUP_FRACTION).floor() as usize;
    let measured = &tasks[warmup.min(tasks.len())..];
    let (mut ttft, mut tpot, mut e2e) = (Vec::new(), Vec::new(), Vec::new());
    let (mut calls, mut rejected, mut met, mut done) = (0, 0, 0usize, 0usize);
    for t in measured {
        let mut ok = true;
        let mut finished = true;
        let mut last = t.arrival;
        for &id in &t.calls {
            let c = &sim.calls[id];
            calls += 1;
            if c.rejected {
                rejected += 1;
                ok = false;
                finished = false;
                continue;
            }
            let (Some(first), Some(end)) = (c.first_token, c.finish) else {
                ok = false;
                finished = false;
                continue;
            };
            let tt = (first - c.arrival) * 1e3;
            ttft.push(tt);
            ok &= sla.ttft_ms.is_none_or(|s| tt <= s);
            if c.output > 1 {
                let tp = (end - first) * 1e3 / (c.output - 1) as f64;
                tpot.push(tp);
                ok &= sla.tpot_ms.is_none_or(|s| tp <= s);
            }
            last = last.max(end);
        }
        if finished {
            done += 1;
            let e = (last - t.arrival) * 1e3;
            e2e.push(e);
            ok &= sla.e2e_ms.is_none_or(|s| e <= s);
        }
        met += usize::from(ok && finished);
    }
    let first = measured.first().map_or(0.0, |t| t.arrival);
    let last = measured.last().map_or(0.0, |t| t.arrival);
    let window_s = (last - first).max(1e-9);
    let ttft = Percentiles::of(&mut ttft);
    let tpot = Percentiles::of(&mut tpot);
    let e2e = Percentiles::of(&mut e2e);
    let meets = rejected == 0
        && done == measured.len()
        && sla.ttft_ms.is_none_or(|s| ttft.p99 <= s)
        && sla.tpot_ms.is_none_or(|s| tpot.p99 <= s)
        && sla.e2e_ms.is_none_or(|s| e2e.p99 <= s);
    let totals = &sim.totals;
    SimReport {
        profile: traffic.profile.name(),
        replicas,
        rate: traffic.arrivals.mean_rate(),
        tasks: measured.len(),
        calls,
        rejected,
        preemptions: totals.preemptions,
        ttft_ms: ttft,
        tpot_ms: tpot,
        e2e_ms: e2e,
        mean_batch: if totals.steps == 0 {
            0.0
        } else {
            totals.seqs_in_steps as f64 / totals.steps as f64
        },
        utilisation: if totals.end_s > 0.0 {
            totals.busy_s / (totals.end_s * f64::from(replicas))
        } else {
            0.0
        },
        throughput_per_s: done as f64 / window_s,
        goodput_per_s: met as f64 / window_s,
        sla_met: if measured.is_empty() {
            0.0
        } else {
            met as f64 / measured.len() as f64
        },
        meets_sla: meets,
        window_s,
        makespan_s: totals.end_s,
    }
}
