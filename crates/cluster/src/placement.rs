//! Placement: which worker runs one GPU-tagged node call.
//!
//! Pure: the dispatcher hands in the pool's members as [`Candidate`]s (with
//! their health and the calls it has in flight on them), the learned
//! [`Profiles`] and the round-robin totals; [`place`] returns a
//! [`Placement`] that names the chosen worker *and* what it thought of
//! every candidate, because the trace shows why (DESIGN.md, "Cluster").
//!
//! 1. **Hard filters**, each recorded per candidate: the worker runs the
//!    node's kind; it serves the node's model; it is healthy (circuit not
//!    open, last liveness probe passed); it was not already tried by this
//!    call (failover); its load is not older than
//!    [`Settings::max_load_age`]; and, when the request already bound the
//!    node's affinity group, it is that worker.
//! 2. **Score** = expected wait, lower is better:
//!    `(running + waiting + pending + 1) / tokens_per_second × kv`, where
//!    `tokens_per_second` is the (model, hardware) [`Profiles`] estimate
//!    learned from finished calls, else the rate the worker reports, else
//!    another candidate's rate scaled by relative strength; when nobody's
//!    rate is known, all count as equally fast and the queue decides. `kv`
//!    grows steeply once the worker's KV cache is over 80 % full (new calls
//!    wait for space or preempt others).
//! 3. **Smooth weighted round robin** ([`Swrr`]) by capability weight among
//!    candidates whose scores tie (within [`Settings::tie`] of the best),
//!    and among every eligible candidate when any of their loads is older
//!    than [`Settings::fresh_for`] or not reported yet (scores would then
//!    compare old news with new).
//!
//! **Capability** (seed 000: embeddings to mid-range cards with memory, the
//! LLM to the strongest card, CPU nodes local). A GPU's *strength* is its
//! memory in GiB × its CUDA compute capability (an H200, 141 GiB × 9.0,
//! outweighs an L4, 22 GiB × 8.9); a CPU-only worker counts 0.05 per core.
//! - LLM calls weigh candidates by strength: idle workers tie, and round
//!   robin by weight sends the first and most calls to the strongest.
//! - Embedding calls weigh them by GPU memory × `(1 − 0.75 s²)`, where `s`
//!   is the candidate's strength relative to the strongest eligible one:
//!   large memory counts, top compute is discounted (an L40S, 48 GiB, is
//!   preferred to an H200, which is kept for the LLM). Besides, while a
//!   weaker candidate is eligible, the strongest one's score is doubled,
//!   so it takes embeddings only when the others are clearly busier.
//! - CPU-tagged nodes never come here: they run in the coordinator.
//!
//! **Policy** ([`Policy`], `[cluster] placement` in the server config):
//! `scored` is all of the above; `round_robin` and `random` keep the hard
//! filters and affinity but then take a plain turn (equal weights) or a
//! uniform draw among the candidates that passed, with no scores and no
//! capability weights. They exist as baselines (`scripts/bench-cluster.sh`
//! compares the three) and as a way out should scoring misjudge a pool.

use std::time::Duration;

use serde::Serialize;

use crate::capability::kv_factor;
pub use crate::capability::{strength, weight};
use crate::member::Member;
use crate::profile::Profiles;
use crate::swrr::Swrr;

/// Which rule picks among the candidates that pass the hard filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Expected wait normalised by throughput, weighted round robin on ties
    /// and stale loads (the module docs).
    #[default]
    Scored,
    /// Plain rotation, every candidate in turn: no weights, no scores.
    RoundRobin,
    /// A uniform draw.
    Random,
}

impl Policy {
    /// Every policy, as the config spells them.
    pub const NAMES: [&'static str; 3] = ["scored", "round_robin", "random"];

    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Scored => "scored",
            Policy::RoundRobin => "round_robin",
            Policy::Random => "random",
        }
    }

    /// The policy named `name` as the config spells it.
    pub fn parse(name: &str) -> Option<Policy> {
        match name {
            "scored" => Some(Policy::Scored),
            "round_robin" => Some(Policy::RoundRobin),
            "random" => Some(Policy::Random),
            _ => None,
        }
    }
}

/// Thresholds placement works with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The rule that chooses among eligible candidates.
    pub policy: Policy,
    /// A worker whose latest load is older than this is left out: its
    /// reports stopped, it may be gone before its lease says so.
    pub max_load_age: Duration,
    /// Loads at most this old are scored; older ones (or none yet) make
    /// the call go round robin.
    pub fresh_for: Duration,
    /// Scores within this fraction of the best count as tied.
    pub tie: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: Policy::Scored,
            max_load_age: Duration::from_secs(10),
            fresh_for: Duration::from_secs(3),
            tie: 0.05,
        }
    }
}

/// What is being placed.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// The node kind (`llm_inference`, `embedding`).
    pub kind: &'a str,
    /// The model the node asks for (`resource.model`).
    pub model: Option<&'a str>,
    pub affinity: Option<Affinity<'a>>,
    /// Workers this call already tried and failed on.
    pub tried: &'a [String],
}

/// The node's affinity group in this request.
#[derive(Debug, Clone, Copy)]
pub struct Affinity<'a> {
    pub group: &'a str,
    /// The worker an earlier node of the group ran on, if one did.
    pub bound: Option<&'a str>,
}

/// One member as the dispatcher sees it now.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub member: &'a Member,
    /// Why the worker must not get work now (circuit open, probe failed).
    pub unhealthy: Option<&'a str>,
    /// Known dead, not merely suspect: it refused a connection (to a call
    /// or a probe). Panic mode never routes to it.
    pub dead: bool,
    /// Calls this coordinator sent it since its load was measured.
    pub pending: u64,
}

/// A hard filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    Kind,
    Model,
    Health,
    Tried,
    Load,
    Affinity,
}

impl Filter {
    pub fn as_str(self) -> &'static str {
        match self {
            Filter::Kind => "kind",
            Filter::Model => "model",
            Filter::Health => "health",
            Filter::Tried => "tried",
            Filter::Load => "load",
            Filter::Affinity => "affinity",
        }
    }
}

/// One filter's verdict on one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub filter: Filter,
    pub passed: bool,
    pub detail: String,
}

/// What placement thought of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assessed {
    pub worker: String,
    pub hardware: String,
    pub checks: Vec<Check>,
    /// Passed every filter.
    pub eligible: bool,
    /// Calls ahead of this one: running + waiting + pending.
    pub queue: Option<u64>,
    /// The throughput the score used.
    pub tokens_per_second: Option<f64>,
    /// Expected wait (relative; lower is better); `None` when unscored.
    pub score: Option<f64>,
    /// Capability weight for round robin.
    pub weight: f64,
}

impl Assessed {
    /// The first filter it failed.
    pub fn failed(&self) -> Option<&Check> {
        self.checks.iter().find(|c| !c.passed)
    }
}

/// How the worker was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The request's affinity group was already bound to it.
    Affinity,
    /// It had the lowest expected wait.
    LeastLoaded,
    /// Several tied on expected wait: weighted round robin among them.
    Tied,
    /// Some loads were stale or missing: weighted round robin.
    Stale,
    /// The `round_robin` policy: its turn in a plain rotation.
    RoundRobin,
    /// The `random` policy: drawn uniformly.
    Random,
    /// Panic mode: every worker for the call was unhealthy but alive, so
    /// the least loaded of them (the pool is never emptied by breakers).
    Panic,
    /// No candidate passed the filters.
    NoWorker,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Affinity => "affinity",
            Rule::LeastLoaded => "least_loaded",
            Rule::Tied => "tied",
            Rule::Stale => "stale",
            Rule::RoundRobin => "round_robin",
            Rule::Random => "random",
            Rule::Panic => "panic",
            Rule::NoWorker => "no_worker",
        }
    }
}

/// The answer: the chosen candidate (index into `candidates`) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    pub chosen: Option<usize>,
    pub rule: Rule,
    /// The worker the affinity group was bound to but which could not take
    /// work any more (the group moves to the chosen worker).
    pub rebound_from: Option<String>,
    pub candidates: Vec<Assessed>,
}

impl Placement {
    pub fn chosen(&self) -> Option<&Assessed> {
        self.chosen.and_then(|i| self.candidates.get(i))
    }

    /// Why no worker could take the call, one reason per candidate.
    pub fn why_none(&self) -> String {
        if self.candidates.is_empty() {
            return "the pool has no workers".into();
        }
        self.candidates
            .iter()
            .map(|a| match a.failed() {
                Some(c) => format!("{}: {}", a.worker, c.detail),
                None => format!("{}: eligible", a.worker),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Places one call; see the module docs for the rules.
pub fn place(
    ask: &Ask<'_>,
    candidates: &[Candidate<'_>],
    profiles: &Profiles,
    swrr: &mut Swrr,
    settings: &Settings,
    now_secs: u64,
) -> Placement {
    let model = ask.model.unwrap_or("");
    let mut out: Vec<Assessed> = candidates
        .iter()
        .map(|c| assess(ask, c, settings, now_secs))
        .collect();
    let mut rebound_from = None;
    if let Some(aff) = ask.affinity {
        let bound_ok = aff.bound.is_some_and(|b| {
            out.iter()
                .any(|a| a.worker == b && a.checks.iter().all(|c| c.passed))
        });
        for a in &mut out {
            let (passed, detail) = match aff.bound {
                Some(b) if bound_ok => (
                    a.worker == b,
                    format!(
                        "affinity group `{}` is bound to {b} in this request",
                        aff.group
                    ),
                ),
                Some(b) => (
                    true,
                    format!(
                        "affinity group `{}` was bound to {b}, which cannot take work now; the group moves",
                        aff.group
                    ),
                ),
                None => (
                    true,
                    format!(
                        "affinity group `{}` binds to the worker chosen now",
                        aff.group
                    ),
                ),
            };
            a.checks.push(Check {
                filter: Filter::Affinity,
                passed,
                detail,
            });
        }
        if let Some(b) = aff.bound.filter(|_| !bound_ok) {
            rebound_from = Some(b.to_string());
        }
    }
    for a in &mut out {
        a.eligible = a.checks.iter().all(|c| c.passed);
    }
    let eligible: Vec<usize> = (0..out.len()).filter(|&i| out[i].eligible).collect();
    if eligible.is_empty() {
        let chosen = panic_pick(&out, candidates);
        return Placement {
            chosen,
            rule: if chosen.is_some() {
                Rule::Panic
            } else {
                Rule::NoWorker
            },
            rebound_from,
            candidates: out,
        };
    }
    let bound = ask
        .affinity
        .and_then(|a| a.bound)
        .filter(|_| rebound_from.is_none());
    // The baselines: a plain turn or a draw among the eligible.
    let baseline = match settings.policy {
        _ if bound.is_some() => None,
        Policy::Scored => None,
        Policy::RoundRobin => {
            let peers: Vec<(&str, f64)> = eligible
                .iter()
                .map(|&i| (out[i].worker.as_str(), 1.0))
                .collect();
            Some((swrr.pick(&peers).map(|k| eligible[k]), Rule::RoundRobin))
        }
        Policy::Random => Some((
            Some(eligible[fastrand::usize(..eligible.len())]),
            Rule::Random,
        )),
    };
    if let Some((chosen, rule)) = baseline {
        return Placement {
            chosen,
            rule,
            rebound_from,
            candidates: out,
        };
    }
    // Capability: the embedding reserve on the strongest card.
    let strengths: Vec<f64> = candidates
        .iter()
        .map(|c| strength(&c.member.record.hardware))
        .collect();
    let top = eligible
        .iter()
        .map(|&i| strengths[i])
        .fold(f64::MIN, f64::max);
    let reserve = ask.kind == "embedding" && eligible.iter().any(|&i| strengths[i] < top);
    let reserved = |i: usize| reserve && strengths[i] >= top;
    for &i in &eligible {
        out[i].weight = weight(ask.kind, &candidates[i].member.record.hardware, top);
    }
    // Throughput: learned, else reported, else scaled by strength.
    let known: Vec<Option<f64>> = candidates
        .iter()
        .map(|c| {
            let hw = c.member.record.hardware.name();
            profiles.get(model, hw).or_else(|| {
                c.member
                    .load
                    .as_ref()
                    .map(|l| l.tokens_per_second)
                    .filter(|t| t.is_finite() && *t > 0.0)
            })
        })
        .collect();
    let reference = eligible.iter().find_map(|&i| known[i].map(|t| (t, i)));
    for &i in &eligible {
        let tps = known[i].unwrap_or_else(|| match reference {
            Some((t, r)) => t * strengths[i].max(1e-6) / strengths[r].max(1e-6),
            None => 1.0,
        });
        out[i].tokens_per_second = Some(tps);
        if let (Some(queue), Some(load)) = (out[i].queue, candidates[i].member.load.as_ref())
            && fresh(load.at, now_secs, settings)
        {
            let mut score = (queue as f64 + 1.0) / tps * kv_factor(load.kv_usage);
            if reserved(i) {
                score *= 2.0;
            }
            out[i].score = Some(score);
        }
    }
    let (chosen, rule) = if let Some(b) = bound {
        (
            eligible.iter().copied().find(|&i| out[i].worker == b),
            Rule::Affinity,
        )
    } else if eligible.iter().any(|&i| out[i].score.is_none()) {
        (round_robin(swrr, &out, &eligible), Rule::Stale)
    } else {
        let best = eligible
            .iter()
            .filter_map(|&i| out[i].score)
            .fold(f64::MAX, f64::min);
        let tied: Vec<usize> = eligible
            .iter()
            .copied()
            .filter(|&i| {
                out[i]
                    .score
                    .is_some_and(|s| s <= best * (1.0 + settings.tie))
            })
            .collect();
        if tied.len() > 1 {
            (round_robin(swrr, &out, &tied), Rule::Tied)
        } else {
            (tied.first().copied(), Rule::LeastLoaded)
        }
    };
    Placement {
        chosen,
        rule,
        rebound_from,
        candidates: out,
    }
}

/// Panic mode (Envoy's panic threshold, at zero healthy hosts): when no
/// candidate is eligible but some failed *only* the health filter and are
/// not known dead, the least loaded of them takes the call. Breakers and
/// probes judge slowness by timeouts, which overload also causes; leaving
/// every such worker out would turn a slow pool into no pool.
fn panic_pick(out: &[Assessed], candidates: &[Candidate<'_>]) -> Option<usize> {
    (0..out.len())
        .filter(|&i| !candidates[i].dead)
        .filter(|&i| {
            let mut failed = out[i].checks.iter().filter(|c| !c.passed).peekable();
            failed.peek().is_some() && failed.all(|c| c.filter == Filter::Health)
        })
        .min_by_key(|&i| out[i].queue.unwrap_or(u64::MAX))
}

fn fresh(at: u64, now_secs: u64, settings: &Settings) -> bool {
    now_secs.saturating_sub(at) <= settings.fresh_for.as_secs()
}

fn round_robin(swrr: &mut Swrr, out: &[Assessed], among: &[usize]) -> Option<usize> {
    let peers: Vec<(&str, f64)> = among
        .iter()
        .map(|&i| (out[i].worker.as_str(), out[i].weight))
        .collect();
    swrr.pick(&peers).map(|k| among[k])
}

/// The filters that need no other candidate.
fn assess(ask: &Ask<'_>, c: &Candidate<'_>, settings: &Settings, now_secs: u64) -> Assessed {
    let r = &c.member.record;
    let mut checks = Vec::with_capacity(6);
    let runs_kind = r.node_kinds.iter().any(|k| k == ask.kind);
    checks.push(Check {
        filter: Filter::Kind,
        passed: runs_kind,
        detail: if runs_kind {
            format!("runs `{}`", ask.kind)
        } else {
            format!("does not run `{}` nodes", ask.kind)
        },
    });
    let serves = ask.model.is_none_or(|m| r.models.iter().any(|x| x == m));
    checks.push(Check {
        filter: Filter::Model,
        passed: serves,
        detail: match ask.model {
            Some(m) if serves => format!("serves `{m}`"),
            Some(m) => format!("does not serve `{m}`"),
            None => "no model asked for".into(),
        },
    });
    checks.push(Check {
        filter: Filter::Health,
        passed: c.unhealthy.is_none(),
        detail: c.unhealthy.unwrap_or("healthy").to_string(),
    });
    if !ask.tried.is_empty() {
        let tried = ask.tried.iter().any(|t| t == &r.id);
        checks.push(Check {
            filter: Filter::Tried,
            passed: !tried,
            detail: if tried {
                "already failed this call".into()
            } else {
                "not tried yet".into()
            },
        });
    }
    let (passed, detail, queue) = match &c.member.load {
        None => (true, "no load reported yet".to_string(), None),
        Some(l) => {
            let age = now_secs.saturating_sub(l.at);
            let queue = l.running + l.waiting + c.pending;
            if age > settings.max_load_age.as_secs() {
                (
                    false,
                    format!(
                        "load is {age} s old, over the {} s limit: the worker stopped reporting",
                        settings.max_load_age.as_secs()
                    ),
                    Some(queue),
                )
            } else {
                (
                    true,
                    format!(
                        "{} running, {} waiting, {} sent since, KV {:.0} %, {age} s old",
                        l.running,
                        l.waiting,
                        c.pending,
                        l.kv_usage * 100.0
                    ),
                    Some(queue),
                )
            }
        }
    };
    checks.push(Check {
        filter: Filter::Load,
        passed,
        detail,
    });
    Assessed {
        worker: r.id.clone(),
        hardware: r.hardware.name().to_string(),
        checks,
        eligible: false,
        queue,
        tokens_per_second: None,
        score: None,
        weight: 0.0,
    }
}

#[cfg(test)]
#[path = "placement_tests.rs"]
mod tests;
