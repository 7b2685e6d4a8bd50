//! Retry policy: how many attempts a node gets and how long to wait between
//! them (exponential backoff with jitter, so retries from many requests do
//! not hit a recovering dependency in lockstep).

use std::time::Duration;

/// Longest wait between two attempts, whatever the base and attempt count.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    /// Wait before the first retry; doubles for each later one.
    pub base: Duration,
}

impl RetryPolicy {
    pub fn new(retries: u32, base: Duration) -> Self {
        RetryPolicy { retries, base }
    }

    /// Whether `attempt` (1-based, just failed) may be followed by another.
    pub fn allows_another(&self, attempt: u32) -> bool {
        attempt <= self.retries
    }

    /// The wait after failed attempt `attempt` (1-based): `base × 2^(attempt-1)`
    /// capped at [`MAX_BACKOFF`], with "equal jitter": half fixed, half random.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self.ceiling(attempt);
        let half = exp / 2;
        let jitter_nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(fastrand::u64(0..=jitter_nanos))
    }

    /// The largest wait [`backoff`](Self::backoff) can return for `attempt`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(20);
        self.base.saturating_mul(1u32 << shift).min(MAX_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_within_bounds() {
        let p = RetryPolicy::new(3, Duration::from_millis(100));
        assert!(p.allows_another(3));
        assert!(!p.allows_another(4));
        for attempt in 1..=5 {
            let ceiling = p.ceiling(attempt);
            assert_eq!(
                ceiling,
                Duration::from_millis(100 << (attempt - 1)).min(MAX_BACKOFF)
            );
            for _ in 0..50 {
                let d = p.backoff(attempt);
                assert!(d >= ceiling / 2 && d <= ceiling, "{d:?} vs {ceiling:?}");
            }
        }
        assert_eq!(p.ceiling(40), MAX_BACKOFF);
    }
}
