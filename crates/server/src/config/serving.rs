//! Settings of how requests are served: the length-of-time syntax, the
//! priority bands' queue order, inbound connections' limits, per-topology
//! limits, the trace store's durability, and outbound reach.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default grants to higher bands a waiting lower band sits out.
pub const DEFAULT_MAX_PASSED_OVER: u32 = 4;

/// A length of time in the config: `300ms`, `30s`, `5m`, `2h`.
pub fn parse_run_time(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Some(ms) = t.strip_suffix("ms") {
        return match ms.parse::<u64>() {
            Ok(n) if n > 0 => Ok(Duration::from_millis(n)),
            _ => Err(format!(
                "`{text}` is not a length of time (expected e.g. 300ms, 30s, 5m, 2h)"
            )),
        };
    }
    glassbox_store::time::parse_duration(t)
        .map(Duration::from_micros)
        .map_err(|_| format!("`{text}` is not a length of time (expected e.g. 300ms, 30s, 5m, 2h)"))
}

/// How admission orders waiting requests by band (see
/// [`crate::service::queue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Priorities {
    /// Slots granted to higher bands in a row, while a lower band waits,
    /// before the lower band gets the next one: each band below the top is
    /// guaranteed at least one slot in `max_passed_over + 1` freed while it
    /// waits, so it is never starved.
    pub max_passed_over: u32,
}

impl Default for Priorities {
    fn default() -> Self {
        Priorities {
            max_passed_over: DEFAULT_MAX_PASSED_OVER,
        }
    }
}

/// Time limits and a per-address cap for every inbound connection, so a
/// client that sends slowly (or not at all) cannot hold connections open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Connections {
    /// From the first byte of a request to the end of its headers.
    pub header_timeout_ms: u64,
    /// From the end of the headers to the last byte of the body.
    pub body_timeout_ms: u64,
    /// How long a connection may wait for its next request (keep-alive).
    pub idle_timeout_ms: u64,
    /// Open connections per client IP address; more are answered 429 and closed.
    pub max_per_client: usize,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout_ms: 10_000,
            body_timeout_ms: 30_000,
            idle_timeout_ms: 60_000,
            max_per_client: 512,
        }
    }
}

impl Connections {
    pub fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    pub fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}

/// Per-topology settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologySettings {
    pub max_concurrency: Option<usize>,
    /// Requests that may wait for a slot (default: the file's `max_queue`).
    pub max_queue: Option<usize>,
    /// The longest a request of this topology may run (`30s`, `5m`); over
    /// it the run is cancelled and answered 504.
    pub max_run_time: Option<String>,
    /// The version promoted at start when several versions of the id are
    /// loaded (`glassbox versions promote` changes it while running).
    pub promoted: Option<String>,
}

/// When a response may leave, relative to its trace's commit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A response (and a stream's last chunk) is sent only after the
    /// transaction holding its request's trace has committed. Commits are
    /// shared by every request waiting at the time (group commit).
    #[default]
    Commit,
    /// Responses do not wait for the commit: more throughput and lower
    /// latency, but a crash (kill -9, OOM kill, power loss) loses the traces
    /// of requests already answered, up to the writer's queue (65,536
    /// records).
    Async,
}

/// The trace store (its URL comes from `--store` / `GLASSBOX_STORE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSettings {
    pub durability: Durability,
}

/// Outbound requests (nodes, model backends): see `glassbox_nodes::outbound`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundSettings {
    /// Address ranges (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`) nodes may
    /// reach although the deny list covers them.
    #[serde(default)]
    pub allow_ranges: Vec<String>,
}
