//! Where a node's work ran in a cluster, and why there: the data of a
//! [`Fact::Placed`](crate::Fact::Placed).
//!
//! Written by the dispatcher of `glassbox serve --cluster` for every node
//! call it sends to a worker: the worker chosen, the rule that chose it,
//! every candidate with the filters it failed and its score, and the
//! workers tried before it failed over. Plain data, so the explanation
//! ([`crate::explain`]) and any reader of a stored trace need nothing of
//! the cluster crate.

use serde::{Deserialize, Serialize};

/// One placement of one node call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The worker that ran the call (id as the pool knows it).
    pub worker: String,
    /// Its hardware name (first GPU, else CPU model).
    pub hardware: String,
    /// The model asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How it was chosen: `least_loaded`, `tied`, `stale` (round robin
    /// because some load reports were stale or missing), `affinity` or
    /// `panic` (every worker unhealthy but alive: the least loaded); with
    /// the baseline policies, `round_robin` or `random`.
    pub rule: String,
    /// The node's affinity group, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// The worker the affinity group was bound to before it moved here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebound_from: Option<String>,
    /// Every worker considered by the placement that chose `worker`.
    pub candidates: Vec<PlacedCandidate>,
    /// Workers the call was sent to first and failed on, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FailedAttempt>,
}

/// A worker as placement saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlacedCandidate {
    pub worker: String,
    pub hardware: String,
    /// The filters it failed; empty when it was eligible (every filter
    /// passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<FilterMiss>,
    /// Its load as the load filter read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
    /// Expected wait (relative; lower is better), when scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// A filter a candidate failed: `kind`, `model`, `health`, `tried`,
/// `load` or `affinity`, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterMiss {
    pub filter: String,
    pub detail: String,
}

/// A worker a call failed on before it moved to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub worker: String,
    pub error: String,
}
