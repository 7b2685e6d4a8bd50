//! The fewest replicas whose simulated P99s meet an SLA.
//!
//! Replicas are doubled until the SLA holds, then the gap is bisected. The
//! search assumes more replicas are never worse (tested for the scheduler
//! here); every count it simulated is kept for the report.

use serde::Serialize;

use super::{Limits, SimReport, SlaP99, StepCost, Traffic, simulate};
use crate::error::PlannerError;

/// The most replicas searched.
pub const MAX_REPLICAS: u32 = 4096;

/// The answer of a search.
#[derive(Debug, Clone, Serialize)]
pub struct Search {
    /// The fewest replicas that meet the SLA, with their run.
    pub best: Option<SimReport>,
    /// Every run, by replica count.
    pub tried: Vec<SimReport>,
}

/// Searches 1..=`max_replicas` replicas for the fewest that meet `sla`.
pub fn fewest_replicas(
    cost: &dyn StepCost,
    limits: Limits,
    traffic: &Traffic,
    sla: SlaP99,
    max_replicas: u32,
) -> Result<Search, PlannerError> {
    if sla.for_profile(&traffic.profile).is_empty() {
        return Err(PlannerError::invalid(
            "sla",
            "give at least one P99 target (TTFT, TPOT, E2E or a deadline) to size against",
        ));
    }
    let max = max_replicas.clamp(1, MAX_REPLICAS);
    let mut tried: Vec<SimReport> = Vec::new();
    let run = |n: u32, tried: &mut Vec<SimReport>| -> Result<bool, PlannerError> {
        let r = simulate(cost, limits, traffic, n, sla)?;
        let ok = r.meets_sla;
        let rejected = r.rejected;
        tried.push(r);
        if rejected > 0 {
            return Err(PlannerError::DoesNotFit {
                message: format!(
                    "{rejected} requests need more KV cache than one replica has ({} tokens); use more GPUs per replica (--tp), fp8 KV or shorter requests",
                    limits.kv_blocks * u64::from(limits.block_tokens)
                ),
            });
        }
        Ok(ok)
    };
    // Doubling: `lo` fails (0 = none tried), `hi` meets.
    let (mut lo, mut hi) = (0u32, None);
    let mut n = 1u32;
    loop {
        if run(n, &mut tried)? {
            hi = Some(n);
            break;
        }
        lo = n;
        if n >= max {
            break;
        }
        n = (n * 2).min(max);
    }
    if let Some(mut h) = hi {
        while h - lo > 1 {
            let mid = lo + (h - lo) / 2;
            if run(mid, &mut tried)? {
                h = mid;
            } else {
                lo = mid;
            }
        }
        hi = Some(h);
    }
    tried.sort_by_key(|r| r.replicas);
    let best = hi.and_then(|h| tried.iter().find(|r| r.replicas == h).cloned());
    Ok(Search { best, tried })
}
