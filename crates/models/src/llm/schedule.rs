//! The order the worker serves requests in, by priority: which waiting
//! request is admitted next, whether a preempted one resumes before it, and
//! which running request is preempted when the KV pool runs out.
//!
//! Priorities follow vLLM's convention (lower runs earlier). Strict
//! priority alone starves: under a steady stream of online requests an
//! offline one would wait forever. So waiting requests age by count, not
//! by clock: each admission of a more urgent request passes over the less
//! urgent ones waiting (and preempted), and one passed over [`MAX_PASSED`]
//! times goes next, whatever its band. Counting admissions keeps the bound independent of
//! how long requests run, and the order deterministic.

use std::time::Instant;

/// Admissions of more urgent requests a waiting request sits out before it
/// goes first.
pub(super) const MAX_PASSED: u32 = 8;

/// What the scheduler knows of a waiting request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Turn {
    pub priority: i32,
    pub arrived: Instant,
    /// More urgent requests admitted while it waited.
    pub passed: u32,
}

impl Turn {
    /// Sort key: aged requests first, then by priority, then by arrival.
    fn key(&self) -> (bool, i32, Instant) {
        (self.passed < MAX_PASSED, self.priority, self.arrived)
    }
}

/// The index of the waiting request to admit next.
pub(super) fn next(waiting: impl IntoIterator<Item = Turn>) -> Option<usize> {
    waiting
        .into_iter()
        .enumerate()
        .min_by_key(|(_, t)| t.key())
        .map(|(i, _)| i)
}

/// Whether `preempted` resumes before `waiting` is admitted: a preempted
/// request keeps its place among equals (it was admitted before), but
/// not against a more urgent request or one that aged.
pub(super) fn resumes_first(preempted: Turn, waiting: Option<Turn>) -> bool {
    waiting.is_none_or(|w| {
        let (p, w) = (preempted.key(), w.key());
        (p.0, p.1) <= (w.0, w.1)
    })
}

/// Counts the admission of a request of `priority` against every less
/// urgent request still waiting.
/// (`waiting`: each request's priority and its passed-over count).
pub(super) fn pass_over<'a>(priority: i32, waiting: impl IntoIterator<Item = (i32, &'a mut u32)>) {
    for (p, passed) in waiting {
        if p > priority {
            *passed = passed.saturating_add(1);
        }
    }
}

/// The running request to preempt when the KV pool runs out: the least
/// urgent, and among those the newest (vLLM's order).
pub(super) fn victim(running: impl IntoIterator<Item = (i32, Instant)>) -> Option<usize> {
    running
        .into_iter()
        .enumerate()
        .max_by_key(|&(_, key)| key)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn turn(priority: i32, at: Instant, secs: u64) -> Turn {
        Turn {
            priority,
            arrived: at + Duration::from_secs(secs),
            passed: 0,
        }
    }

    #[test]
    fn online_goes_before_offline_then_arrival_order() {
        let t = Instant::now();
        let waiting = [turn(1, t, 0), turn(0, t, 2), turn(0, t, 1), turn(-1, t, 3)];
        assert_eq!(next(waiting), Some(3), "interactive first");
        assert_eq!(
            next(waiting[..3].iter().copied()),
            Some(2),
            "then the oldest online"
        );
        assert_eq!(next([]), None);
    }

    #[test]
    fn an_offline_request_passed_over_enough_goes_next() {
        let t = Instant::now();
        let mut offline = turn(1, t, 0);
        let online = turn(0, t, 5);
        let mut admitted_online = 0;
        loop {
            if next([offline, online]) == Some(0) {
                break;
            }
            admitted_online += 1;
            pass_over(online.priority, [(offline.priority, &mut offline.passed)]);
            // An equal does not age it.
            pass_over(offline.priority, [(offline.priority, &mut offline.passed)]);
            assert!(admitted_online <= MAX_PASSED, "offline starved");
        }
        assert_eq!(admitted_online, MAX_PASSED);
    }

    #[test]
    fn the_least_urgent_then_newest_is_preempted() {
        let t = Instant::now();
        let s = |secs| t + Duration::from_secs(secs);
        // An offline request older than two online ones goes first.
        assert_eq!(victim([(0, s(2)), (1, s(0)), (0, s(3))]), Some(1));
        // Among equals, the newest (vLLM's order).
        assert_eq!(victim([(0, s(2)), (0, s(3)), (0, s(1))]), Some(1));
        assert_eq!(victim([]), None);
    }

    #[test]
    fn a_preempted_request_resumes_before_equals_but_not_before_more_urgent_ones() {
        let t = Instant::now();
        let preempted = turn(1, t, 0);
        assert!(resumes_first(preempted, None));
        assert!(resumes_first(preempted, Some(turn(1, t, 9))));
        assert!(!resumes_first(preempted, Some(turn(0, t, 9))));
        let aged = Turn {
            passed: MAX_PASSED,
            ..turn(1, t, 9)
        };
        assert!(!resumes_first(turn(0, t, 0), Some(aged)));
    }
}
