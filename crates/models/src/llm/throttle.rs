//! A test throttle, for benchmarks only: makes this process's LLM engines
//! behave like hardware `FACTOR` times slower, so a pool of workers on one
//! small machine can be heterogeneous (`glassbox worker --test-slowdown`,
//! `scripts/bench-cluster.sh`).
//!
//! Each engine step additionally sleeps `(FACTOR − 1)` times the compute
//! it measured, and the sleep comes *before* the step's tokens go out, so
//! time to first token, time per token and throughput all stretch by
//! `FACTOR` as on a slower card. Sleeping leaves the CPU to the other
//! workers on the machine, as a separate card would. Off (1) by default;
//! nothing else about the engine changes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The factor's bits (an `f64`); 0 means never set, i.e. 1.
static SLOWDOWN: AtomicU64 = AtomicU64::new(0);

/// Sets the test slowdown of every LLM engine in this process. Factors
/// that are not finite or below 1 turn it off.
pub fn set_test_slowdown(factor: f64) {
    let factor = if factor.is_finite() && factor > 1.0 {
        factor
    } else {
        1.0
    };
    SLOWDOWN.store(factor.to_bits(), Ordering::Relaxed);
}

/// The test slowdown in effect (1: none).
pub fn test_slowdown() -> f64 {
    match SLOWDOWN.load(Ordering::Relaxed) {
        0 => 1.0,
        bits => f64::from_bits(bits),
    }
}

/// The throttle of one engine step: call [`Step::pause`] before each piece
/// of output leaves and once after the step.
pub(super) struct Step {
    extra: f64,
    mark: Instant,
}

impl Step {
    /// `None` when no slowdown is set.
    pub(super) fn start() -> Option<Step> {
        let factor = test_slowdown();
        (factor > 1.0).then(|| Step {
            extra: factor - 1.0,
            mark: Instant::now(),
        })
    }

    /// Sleeps `(FACTOR − 1)` × the time worked since the last pause.
    pub(super) fn pause(&mut self) {
        std::thread::sleep(stretch(self.mark.elapsed(), self.extra));
        self.mark = Instant::now();
    }
}

fn stretch(worked: Duration, extra: f64) -> Duration {
    Duration::try_from_secs_f64(worked.as_secs_f64() * extra).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factor_is_off_unless_above_one() {
        assert_eq!(
            stretch(Duration::from_millis(10), 3.0),
            Duration::from_millis(30)
        );
        assert_eq!(stretch(Duration::from_millis(10), f64::NAN), Duration::ZERO);
        // One test touches the process-wide setting, in order.
        assert_eq!(test_slowdown(), 1.0);
        assert!(Step::start().is_none());
        set_test_slowdown(4.0);
        assert_eq!(test_slowdown(), 4.0);
        assert_eq!(Step::start().map(|s| s.extra), Some(3.0));
        for off in [0.5, f64::INFINITY, f64::NAN, 1.0] {
            set_test_slowdown(off);
            assert_eq!(test_slowdown(), 1.0, "{off}");
        }
    }
}
