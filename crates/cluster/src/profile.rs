//! Throughput profiles: how fast one model generates on one kind of
//! hardware, learned online.
//!
//! Keyed by (model, hardware name) rather than by worker, so a worker that
//! joins on hardware the pool has seen starts with a good estimate, and a
//! restarted worker (a new member) keeps its hardware's history. Each
//! observation is the output tokens per second of one finished call
//! (an EWMA: recent calls count most). Until a call has finished,
//! placement reads the rate the worker itself reports instead
//! ([`crate::placement`]).

use std::collections::HashMap;

/// The weight of the newest observation.
pub const DEFAULT_ALPHA: f64 = 0.2;

/// Learned tokens per second per (model, hardware).
#[derive(Debug, Clone)]
pub struct Profiles {
    alpha: f64,
    rates: HashMap<(String, String), Rate>,
}

#[derive(Debug, Clone, Copy)]
struct Rate {
    tokens_per_second: f64,
    observations: u64,
}

impl Default for Profiles {
    fn default() -> Self {
        Profiles::new(DEFAULT_ALPHA)
    }
}

impl Profiles {
    /// `alpha` in (0, 1]: the weight of each new observation.
    pub fn new(alpha: f64) -> Profiles {
        Profiles {
            alpha: alpha.clamp(0.01, 1.0),
            rates: HashMap::new(),
        }
    }

    /// Adds one call's observed rate. Ignores rates that are not finite
    /// and positive (a call that produced nothing says nothing of speed).
    pub fn observe(&mut self, model: &str, hardware: &str, tokens_per_second: f64) {
        if !(tokens_per_second.is_finite() && tokens_per_second > 0.0) {
            return;
        }
        let key = (model.to_string(), hardware.to_string());
        let alpha = self.alpha;
        self.rates
            .entry(key)
            .and_modify(|r| {
                r.tokens_per_second =
                    alpha * tokens_per_second + (1.0 - alpha) * r.tokens_per_second;
                r.observations += 1;
            })
            .or_insert(Rate {
                tokens_per_second,
                observations: 1,
            });
    }

    /// The current estimate, if any.
    pub fn get(&self, model: &str, hardware: &str) -> Option<f64> {
        self.rates
            .get(&(model.to_string(), hardware.to_string()))
            .map(|r| r.tokens_per_second)
    }

    /// Calls observed for (model, hardware).
    pub fn observations(&self, model: &str, hardware: &str) -> u64 {
        self.rates
            .get(&(model.to_string(), hardware.to_string()))
            .map_or(0, |r| r.observations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_move_the_estimate_towards_recent_calls() {
        let mut p = Profiles::new(0.5);
        p.observe("m", "L4", 100.0);
        assert_eq!(p.get("m", "L4"), Some(100.0));
        p.observe("m", "L4", 200.0);
        assert_eq!(p.get("m", "L4"), Some(150.0));
        assert_eq!(p.observations("m", "L4"), 2);
        assert_eq!(p.get("m", "H200"), None, "per hardware");
        assert_eq!(p.get("other", "L4"), None, "per model");
        p.observe("m", "L4", f64::NAN);
        p.observe("m", "L4", 0.0);
        assert_eq!(p.get("m", "L4"), Some(150.0), "empty calls say nothing");
    }
}
