//! A retry budget per coordinator: failovers are allowed up to a fraction
//! of the calls of the last [`BudgetSettings::window`], plus a small fixed
//! rate, as Finagle's `RetryBudget` and Envoy's retry budgets do.
//!
//! Why: when a worker dies, every call it held fails over at once onto the
//! survivors; a failure that makes each call cost two (or three) attempts
//! multiplies the load on exactly the workers left. A budget caps that
//! multiplication at `1 + ratio` in steady state, while the fixed rate lets
//! a quiet coordinator still retry its few calls.
//!
//! Pure state with the time passed in, so it is tested without a clock;
//! the dispatcher keeps one behind its lock.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How much retrying a budget allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetSettings {
    /// Retries allowed per call in the window (0.2: one in five).
    pub ratio: f64,
    /// Retries allowed per second of the window on top of `ratio`.
    pub min_per_second: f64,
    /// How far back calls and retries count.
    pub window: Duration,
}

impl Default for BudgetSettings {
    fn default() -> Self {
        BudgetSettings {
            ratio: 0.2,
            min_per_second: 0.5,
            window: Duration::from_secs(10),
        }
    }
}

/// Why a retry was refused: the counts it was judged on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spent {
    pub calls: u64,
    pub retries: u64,
    pub allowed: f64,
    pub settings: BudgetSettings,
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the retry budget is spent: {} failovers for {} calls in the last {} s, {} allowed ({:.0} % of calls + {}/s)",
            self.retries,
            self.calls,
            self.settings.window.as_secs(),
            self.allowed.floor() as u64,
            self.settings.ratio * 100.0,
            self.settings.min_per_second
        )
    }
}

/// Calls and retries per second of the window.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    settings: BudgetSettings,
    origin: Option<Instant>,
    /// (second since `origin`, calls, retries), oldest first.
    seconds: VecDeque<(u64, u64, u64)>,
}

impl RetryBudget {
    pub fn new(settings: BudgetSettings) -> RetryBudget {
        RetryBudget {
            settings,
            origin: None,
            seconds: VecDeque::new(),
        }
    }

    pub fn settings(&self) -> BudgetSettings {
        self.settings
    }

    /// The bucket of `now`, the window's older ones pruned.
    fn bucket(&mut self, now: Instant) -> &mut (u64, u64, u64) {
        let origin = *self.origin.get_or_insert(now);
        let second = now.saturating_duration_since(origin).as_secs();
        let window = self.settings.window.as_secs().max(1);
        while self
            .seconds
            .front()
            .is_some_and(|(s, _, _)| s + window <= second)
        {
            self.seconds.pop_front();
        }
        if self.seconds.back().is_none_or(|(s, _, _)| *s != second) {
            self.seconds.push_back((second, 0, 0));
        }
        self.seconds.back_mut().expect("pushed above")
    }

    /// A call's first attempt is being sent.
    pub fn called(&mut self, now: Instant) {
        self.bucket(now).1 += 1;
    }

    /// Spends one retry if the budget allows it; else why not.
    pub fn try_retry(&mut self, now: Instant) -> Result<(), Spent> {
        self.bucket(now);
        let calls: u64 = self.seconds.iter().map(|b| b.1).sum();
        let retries: u64 = self.seconds.iter().map(|b| b.2).sum();
        let s = self.settings;
        let allowed = s.ratio * calls as f64 + s.min_per_second * s.window.as_secs_f64();
        if (retries + 1) as f64 > allowed {
            return Err(Spent {
                calls,
                retries,
                allowed,
                settings: s,
            });
        }
        self.bucket(now).2 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> (RetryBudget, Instant) {
        let settings = BudgetSettings {
            ratio: 0.2,
            min_per_second: 0.3,
            window: Duration::from_secs(10),
        };
        (RetryBudget::new(settings), Instant::now())
    }

    #[test]
    fn retries_are_capped_at_the_ratio_of_calls_plus_the_fixed_rate() {
        let (mut b, t0) = budget();
        for _ in 0..50 {
            b.called(t0);
        }
        // 0.2 × 50 + 0.3 × 10 = 13 retries.
        for i in 0..13 {
            assert!(b.try_retry(t0).is_ok(), "retry {i}");
        }
        let spent = b.try_retry(t0).unwrap_err();
        assert_eq!((spent.calls, spent.retries), (50, 13));
        let why = spent.to_string();
        assert!(why.contains("13 failovers for 50 calls"), "{why}");
        assert!(why.contains("20 % of calls"), "{why}");
        // More calls earn more retries.
        for _ in 0..5 {
            b.called(t0);
        }
        assert!(b.try_retry(t0).is_ok());
        assert!(b.try_retry(t0).is_err());
    }

    #[test]
    fn a_quiet_coordinator_still_retries_at_the_fixed_rate() {
        let (mut b, t0) = budget();
        b.called(t0);
        // 0.2 + 3 = 3.2: three retries.
        for _ in 0..3 {
            assert!(b.try_retry(t0).is_ok());
        }
        assert!(b.try_retry(t0).is_err());
    }

    #[test]
    fn old_calls_and_retries_leave_the_window() {
        let (mut b, t0) = budget();
        for _ in 0..3 {
            b.called(t0);
            b.try_retry(t0).unwrap();
        }
        assert!(b.try_retry(t0).is_err(), "3 of 3.6 spent");
        let later = t0 + Duration::from_secs(10);
        assert!(b.try_retry(later).is_ok(), "the window moved on");
        let spent = b.try_retry(later).map(|_| b.try_retry(later));
        assert!(matches!(spent, Ok(Ok(()))), "{spent:?}");
        assert!(b.try_retry(later).is_err(), "3 per window without calls");
    }
}
