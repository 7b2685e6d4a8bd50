//! A circuit breaker per worker: after `failures_to_open` consecutive
//! failures (calls or liveness probes) the worker is left alone for
//! `cool_down`; then one trial (a call or the next probe) decides whether it
//! closes again or stays open for another cool-down.
//!
//! Pure state with the time passed in, so every transition is tested
//! without a clock; the dispatcher keeps one per worker behind its lock.

use std::time::{Duration, Instant};

use serde::Serialize;

/// When a breaker opens and how long it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failures that open the circuit.
    pub failures_to_open: u32,
    /// How long an open circuit refuses work before a trial.
    pub cool_down: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failures_to_open: 3,
            cool_down: Duration::from_secs(10),
        }
    }
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Work flows.
    Closed,
    /// Work is refused until the cool-down ends.
    Open,
    /// The cool-down ended: one trial is let through.
    HalfOpen,
}

/// One worker's breaker.
#[derive(Debug, Clone)]
pub struct Breaker {
    settings: BreakerSettings,
    failures: u32,
    opened_at: Option<Instant>,
    /// A half-open trial is in flight: nothing else is let through.
    trial: bool,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Breaker {
        Breaker {
            settings,
            failures: 0,
            opened_at: None,
            trial: false,
        }
    }

    pub fn state(&self, now: Instant) -> BreakerState {
        match self.opened_at {
            None => BreakerState::Closed,
            Some(at) if now.saturating_duration_since(at) < self.settings.cool_down => {
                BreakerState::Open
            }
            Some(_) => BreakerState::HalfOpen,
        }
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether work may go to the worker now; `Err` says why not.
    pub fn admits(&self, now: Instant) -> Result<(), String> {
        match self.state(now) {
            BreakerState::Closed => Ok(()),
            BreakerState::HalfOpen if !self.trial => Ok(()),
            BreakerState::HalfOpen => Err("circuit half-open, its trial call is running".into()),
            BreakerState::Open => {
                let left = self.opened_at.map_or(Duration::ZERO, |at| {
                    self.settings
                        .cool_down
                        .saturating_sub(now.saturating_duration_since(at))
                });
                Err(format!(
                    "circuit open after {} consecutive failures ({} s to the next trial)",
                    self.failures,
                    left.as_secs_f64().ceil() as u64
                ))
            }
        }
    }

    /// Work is being sent: a half-open breaker lets nothing else through
    /// until this trial reports.
    pub fn begin(&mut self, now: Instant) {
        if self.state(now) == BreakerState::HalfOpen {
            self.trial = true;
        }
    }

    /// The trial ended without a verdict (its caller gave up): the next
    /// call or probe may try again.
    pub fn abandon(&mut self) {
        self.trial = false;
    }

    /// A call or probe succeeded: the circuit closes.
    pub fn success(&mut self) {
        self.failures = 0;
        self.opened_at = None;
        self.trial = false;
    }

    /// A call or probe failed: counts towards opening; a failed trial
    /// re-opens for another cool-down.
    pub fn failure(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        let half_open = self.state(now) == BreakerState::HalfOpen;
        if half_open || self.failures >= self.settings.failures_to_open.max(1) {
            self.opened_at = Some(now);
        }
        self.trial = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> (Breaker, Instant) {
        let settings = BreakerSettings {
            failures_to_open: 3,
            cool_down: Duration::from_secs(10),
        };
        (Breaker::new(settings), Instant::now())
    }

    #[test]
    fn opens_after_n_consecutive_failures_only() {
        let (mut b, t0) = breaker();
        b.failure(t0);
        b.failure(t0);
        assert_eq!(b.state(t0), BreakerState::Closed);
        b.success();
        b.failure(t0);
        b.failure(t0);
        assert_eq!(
            b.state(t0),
            BreakerState::Closed,
            "a success resets the count"
        );
        b.failure(t0);
        assert_eq!(b.state(t0), BreakerState::Open);
        let why = b.admits(t0 + Duration::from_secs(3)).unwrap_err();
        assert!(why.contains("3 consecutive failures"), "{why}");
        assert!(why.contains("7 s"), "{why}");
    }

    #[test]
    fn half_open_after_cool_down_lets_one_trial_through() {
        let (mut b, t0) = breaker();
        for _ in 0..3 {
            b.failure(t0);
        }
        let later = t0 + Duration::from_secs(10);
        assert_eq!(b.state(later), BreakerState::HalfOpen);
        assert!(b.admits(later).is_ok());
        b.begin(later);
        assert!(b.admits(later).is_err(), "one trial at a time");
        b.abandon();
        assert!(b.admits(later).is_ok(), "a trial given up frees the way");
        b.begin(later);
        b.success();
        assert_eq!(b.state(later), BreakerState::Closed);
        assert!(b.admits(later).is_ok());
    }

    #[test]
    fn a_failed_trial_reopens_for_a_full_cool_down() {
        let (mut b, t0) = breaker();
        for _ in 0..3 {
            b.failure(t0);
        }
        let trial = t0 + Duration::from_secs(11);
        b.begin(trial);
        b.failure(trial);
        assert_eq!(b.state(trial), BreakerState::Open);
        assert_eq!(
            b.state(trial + Duration::from_secs(9)),
            BreakerState::Open,
            "the cool-down restarts at the failed trial"
        );
        assert_eq!(
            b.state(trial + Duration::from_secs(10)),
            BreakerState::HalfOpen
        );
    }
}
