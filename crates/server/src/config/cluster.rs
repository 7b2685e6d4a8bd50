//! The `[cluster]` section of the server config: how `glassbox serve
//! --cluster` places GPU-tagged node calls on the pool's workers, times
//! them out, fails them over and probes the workers, resolved into the
//! dispatcher's [`DispatchOptions`] (docs/cluster.md, "Settings").
//!
//! ```toml
//! [cluster]                    # every field optional; these are the defaults
//! placement = "scored"         # or the baselines "round_robin", "random"
//! attempt_timeout = "10s"      # longest silence from a worker during a call
//! max_attempts = 3             # workers one call is sent to, failovers included
//! probe_interval = "3s"        # every worker gets a one-token liveness probe
//! probe_timeout = "5s"         # a slower probe takes the worker out
//! max_load_age = "10s"         # older load: the worker is left out
//! fresh_for = "3s"             # older load (or none): weighted round robin
//! tie = 0.05                   # scores within this fraction of the best tie
//! failures_to_open = 3         # consecutive failures that open a circuit
//! cool_down = "10s"            # how long an open circuit refuses work
//! retry_ratio = 0.2            # failovers allowed per call of the last 10 s ...
//! retry_per_second = 0.5       # ... plus this many per second (the retry budget)
//! ```
//!
//! Lengths of time are written as elsewhere in the file (`300ms`, `10s`,
//! `5m`); every problem is reported, each under `cluster.FIELD`.

use std::time::Duration;

use glassbox_cluster::Policy;
use glassbox_nodes::cluster::DispatchOptions;
use serde::{Deserialize, Serialize};

use super::serving::parse_run_time;

/// `[cluster]` as written in the file: every field optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    pub placement: Option<String>,
    pub attempt_timeout: Option<String>,
    pub max_attempts: Option<u32>,
    pub probe_interval: Option<String>,
    pub probe_timeout: Option<String>,
    pub max_load_age: Option<String>,
    pub fresh_for: Option<String>,
    pub tie: Option<f64>,
    pub failures_to_open: Option<u32>,
    pub cool_down: Option<String>,
    pub retry_ratio: Option<f64>,
    pub retry_per_second: Option<f64>,
}

impl ClusterSection {
    /// The dispatcher's options, or every problem found.
    pub fn resolve(&self) -> Result<DispatchOptions, Vec<String>> {
        let mut o = DispatchOptions::default();
        let mut problems = Vec::new();
        if let Some(name) = &self.placement {
            match Policy::parse(name) {
                Some(p) => o.placement.policy = p,
                None => problems.push(format!(
                    "cluster.placement: `{name}` is not a placement policy (expected one of {})",
                    Policy::NAMES.map(|n| format!("`{n}`")).join(", ")
                )),
            }
        }
        let mut time = |field: &str, value: &Option<String>, slot: &mut Duration| {
            if let Some(text) = value {
                match parse_run_time(text) {
                    Ok(d) => *slot = d,
                    Err(e) => problems.push(format!("cluster.{field}: {e}")),
                }
            }
        };
        time(
            "attempt_timeout",
            &self.attempt_timeout,
            &mut o.attempt_timeout,
        );
        time(
            "probe_interval",
            &self.probe_interval,
            &mut o.probe_interval,
        );
        time("probe_timeout", &self.probe_timeout, &mut o.probe_timeout);
        time(
            "max_load_age",
            &self.max_load_age,
            &mut o.placement.max_load_age,
        );
        time("fresh_for", &self.fresh_for, &mut o.placement.fresh_for);
        time("cool_down", &self.cool_down, &mut o.breaker.cool_down);
        for (field, value, slot) in [
            ("max_attempts", self.max_attempts, &mut o.max_attempts),
            (
                "failures_to_open",
                self.failures_to_open,
                &mut o.breaker.failures_to_open,
            ),
        ] {
            match value {
                Some(0) => problems.push(format!("cluster.{field}: must be at least 1, got 0")),
                Some(n) => *slot = n,
                None => {}
            }
        }
        for (field, value, slot, max) in [
            ("retry_ratio", self.retry_ratio, &mut o.budget.ratio, 10.0),
            (
                "retry_per_second",
                self.retry_per_second,
                &mut o.budget.min_per_second,
                1000.0,
            ),
        ] {
            match value {
                Some(v) if v.is_finite() && (0.0..=max).contains(&v) => *slot = v,
                Some(v) => problems.push(format!(
                    "cluster.{field}: must be between 0 and {max} (0 turns failovers off but for the other setting), got {v}"
                )),
                None => {}
            }
        }
        if let Some(tie) = self.tie {
            if (0.0..=1.0).contains(&tie) {
                o.placement.tie = tie;
            } else {
                problems.push(format!(
                    "cluster.tie: must be between 0 and 1 (a fraction of the best score), got {tie}"
                ));
            }
        }
        // Loads are reported in whole seconds: below one, every load is old.
        for (field, d) in [
            ("max_load_age", o.placement.max_load_age),
            ("fresh_for", o.placement.fresh_for),
        ] {
            if d < Duration::from_secs(1) {
                problems.push(format!(
                    "cluster.{field}: must be at least 1s (workers report their load about every second), got {}ms",
                    d.as_millis()
                ));
            }
        }
        if o.placement.fresh_for > o.placement.max_load_age {
            problems.push(format!(
                "cluster.fresh_for ({} s) is longer than cluster.max_load_age ({} s): a load too old to keep the worker cannot be fresh (hint: lower `fresh_for`)",
                o.placement.fresh_for.as_secs(),
                o.placement.max_load_age.as_secs()
            ));
        }
        if problems.is_empty() {
            Ok(o)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    #[test]
    fn every_field_reaches_the_dispatcher() {
        let c = Config::parse(
            r#"
            [cluster]
            placement = "round_robin"
            attempt_timeout = "1500ms"
            max_attempts = 2
            probe_interval = "1s"
            probe_timeout = "2s"
            max_load_age = "20s"
            fresh_for = "4s"
            tie = 0.1
            failures_to_open = 5
            cool_down = "1m"
            retry_ratio = 0.3
            retry_per_second = 2.0
            "#,
        )
        .unwrap();
        let d = c.dispatch;
        assert_eq!(d.placement.policy, Policy::RoundRobin);
        assert_eq!(d.attempt_timeout, Duration::from_millis(1500));
        assert_eq!(d.max_attempts, 2);
        assert_eq!(d.probe_interval, Duration::from_secs(1));
        assert_eq!(d.probe_timeout, Duration::from_secs(2));
        assert_eq!(d.placement.max_load_age, Duration::from_secs(20));
        assert_eq!(d.placement.fresh_for, Duration::from_secs(4));
        assert_eq!(d.placement.tie, 0.1);
        assert_eq!(d.breaker.failures_to_open, 5);
        assert_eq!(d.breaker.cool_down, Duration::from_secs(60));
        assert_eq!((d.budget.ratio, d.budget.min_per_second), (0.3, 2.0));
    }

    #[test]
    fn without_the_section_the_defaults_hold() {
        assert_eq!(Config::default().dispatch, DispatchOptions::default());
        let c = Config::parse("[cluster]\nplacement = \"random\"").unwrap();
        assert_eq!(c.dispatch.placement.policy, Policy::Random);
        assert_eq!(
            c.dispatch.max_attempts,
            DispatchOptions::default().max_attempts
        );
    }

    #[test]
    fn every_problem_is_named_with_its_field() {
        let err = Config::parse(
            r#"
            [cluster]
            placement = "least_loaded"
            attempt_timeout = "soon"
            max_attempts = 0
            tie = 2.0
            max_load_age = "2s"
            fresh_for = "3s"
            probe_timeout = "500ms"
            retry_ratio = -1.0
            "#,
        )
        .unwrap_err();
        for want in [
            "cluster.placement: `least_loaded` is not a placement policy (expected one of `scored`, `round_robin`, `random`)",
            "cluster.attempt_timeout: `soon` is not a length of time",
            "cluster.max_attempts: must be at least 1",
            "cluster.tie: must be between 0 and 1",
            "cluster.retry_ratio: must be between 0 and 10",
            "cluster.fresh_for (3 s) is longer than cluster.max_load_age (2 s)",
        ] {
            assert!(err.contains(want), "missing `{want}` in: {err}");
        }
        assert!(!err.contains("probe_timeout"), "500ms is fine: {err}");
        let err = Config::parse("[cluster]\nfresh_for = \"300ms\"").unwrap_err();
        assert!(
            err.contains("cluster.fresh_for: must be at least 1s"),
            "{err}"
        );
        let err = Config::parse("[cluster]\nplacment = \"random\"").unwrap_err();
        assert!(
            err.contains("placment"),
            "unknown fields are refused: {err}"
        );
    }
}
