//! "Can this call start in time?" A coordinator tells a worker how long a
//! call may wait to start (what is left of its node's timeout and of the
//! request's deadline; the server reads it from the header
//! `glassbox_nodes::cluster::START_WITHIN_HEADER`); a worker whose local
//! LLM engines would make it wait longer refuses at once
//! (`cannot_start_in_time`, with its estimate as the retry delay), instead of
//! accepting the call and keeping it queued until the coordinator gives up
//! (docs/cluster.md, "Slow is not dead"). The coordinator then tries
//! another worker, or sheds the call by priority.
//!
//! The estimate is deliberately simple and errs towards accepting: calls
//! waiting in the engines × the engines' mean end-to-end latency so far ÷
//! the calls they run at once. With nothing waiting, or no finished call
//! yet to learn from, every call is accepted.

use std::time::Duration;

use glassbox_models::EngineLoad;

use super::error::ServiceError;

/// How long a new call would wait for the engines `loads`, if known.
pub fn estimate(loads: &[EngineLoad]) -> Option<Duration> {
    let waiting: usize = loads.iter().map(|l| l.waiting).sum();
    if waiting == 0 {
        return Some(Duration::ZERO);
    }
    let running: usize = loads.iter().map(|l| l.running).sum();
    let count: u64 = loads.iter().map(|l| l.latency.e2e_latency.count).sum();
    let sum: f64 = loads.iter().map(|l| l.latency.e2e_latency.sum).sum();
    if count == 0 || !sum.is_finite() {
        return None;
    }
    let mean = sum / count as f64;
    let secs = waiting as f64 * mean / running.max(1) as f64;
    Some(Duration::from_secs_f64(secs.clamp(0.0, 86_400.0)))
}

/// Refuses a call asked to start `within` less than the engines' wait.
pub fn check(within: Option<Duration>, loads: &[EngineLoad]) -> Result<(), ServiceError> {
    let Some(within) = within else {
        return Ok(());
    };
    let Some(wait) = estimate(loads).filter(|w| *w > within) else {
        return Ok(());
    };
    let waiting: usize = loads.iter().map(|l| l.waiting).sum();
    Err(ServiceError::CannotStartInTime {
        within,
        waiting,
        wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(running: usize, waiting: usize, finished: u64, secs: f64) -> EngineLoad {
        let mut l = glassbox_models::EngineLoad {
            running,
            waiting,
            kv_reserved: 0,
            kv_cells: 1,
            prefix_queries: 0,
            prefix_hits: 0,
            prefix_host_hits: 0,
            host_cache_bytes: 0,
            chunk_placed_tokens: 0,
            chunk_cache_bytes: 0,
            spec_drafts: 0,
            spec_draft_tokens: 0,
            spec_accepted_tokens: 0,
            preemptions: 0,
            generation_tokens: 0,
            latency: Default::default(),
        };
        l.latency.e2e_latency.count = finished;
        l.latency.e2e_latency.sum = secs;
        l
    }

    fn within(ms: u64) -> Option<Duration> {
        Some(Duration::from_millis(ms))
    }

    #[test]
    fn a_call_that_cannot_start_in_time_is_refused_with_the_estimate() {
        // 6 waiting, 2 at a time, 4 s each: about 12 s.
        let busy = [load(2, 6, 10, 40.0)];
        assert_eq!(estimate(&busy), Some(Duration::from_secs(12)));
        let err = check(within(5_000), &busy).unwrap_err();
        assert_eq!(err.code(), "cannot_start_in_time");
        assert_eq!(err.retry_after(), Some(12));
        let message = err.to_string();
        assert!(message.contains("6 calls wait"), "{message}");
        assert!(message.contains("about 12000 ms"), "{message}");
        assert!(check(within(20_000), &busy).is_ok(), "it starts in time");
        assert!(check(None, &busy).is_ok(), "no deadline told");
    }

    #[test]
    fn nothing_waiting_or_nothing_learned_yet_accepts() {
        assert!(check(within(1), &[load(3, 0, 10, 40.0)]).is_ok());
        assert!(check(within(1), &[load(3, 5, 0, 0.0)]).is_ok());
        assert_eq!(estimate(&[]), Some(Duration::ZERO));
    }
}
