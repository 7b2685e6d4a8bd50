//! Priority bands: how urgent a request is, chosen per request and capped
//! per API key by the server, carried by the engine to the nodes (the local
//! LLM engine admits and preempts by it) and recorded in the trace.
//!
//! Three bands, most urgent first: `interactive` (a person waits on every
//! token), `online` (the default) and `offline` (batch work that may wait;
//! `batch` is another name for it). Waiting requests are served in band
//! order; the lowest band is shed first when a queue is full and preempted
//! first when KV memory runs out, yet never starved (see the server's
//! admission).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A request's priority band. Ordered from most to least urgent, so
/// `Interactive < Online < Offline`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Above online: a person waits on every token.
    Interactive,
    /// The default.
    #[default]
    Online,
    /// Batch work that may wait; served after the others, shed and
    /// preempted first, never starved.
    #[serde(alias = "batch")]
    Offline,
}

impl Priority {
    /// Every band, most urgent first.
    pub const ALL: [Priority; 3] = [Priority::Interactive, Priority::Online, Priority::Offline];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Interactive => "interactive",
            Priority::Online => "online",
            Priority::Offline => "offline",
        }
    }

    /// Position in [`Priority::ALL`] (0: most urgent).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The band as vLLM's integer `priority` (lower runs earlier): -1, 0, 1.
    pub fn rank(self) -> i32 {
        self as i32 - 1
    }

    /// The band of vLLM's integer `priority`: below 0 interactive, 0
    /// online, above 0 offline.
    pub fn from_rank(rank: i64) -> Priority {
        match rank {
            ..0 => Priority::Interactive,
            0 => Priority::Online,
            _ => Priority::Offline,
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = String;

    /// `interactive`, `online`, `offline` or `batch`, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "interactive" => Ok(Priority::Interactive),
            "online" => Ok(Priority::Online),
            "offline" | "batch" => Ok(Priority::Offline),
            other => Err(format!(
                "unknown priority `{other}` (expected interactive, online, offline or batch)"
            )),
        }
    }
}

/// How admission treated a request: its band, whether its key capped the
/// band it asked for, how long it waited for a slot and how many requests
/// of higher bands went first meanwhile, and the run-time limit it ran
/// under. Told in the explanation only when it changed something.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Scheduling {
    /// The band it ran in.
    pub priority: Priority,
    /// The band it asked for, when its key's `max_priority` lowered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<Priority>,
    /// The key whose cap applied (with `asked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Milliseconds it waited in the topology's queue for a slot.
    #[serde(default)]
    pub waited_ms: u64,
    /// Requests of higher bands given a slot while it waited.
    #[serde(default)]
    pub passed_over: u32,
    /// The maximum run time it ran under, in milliseconds, and where it is
    /// set (`topology`, `key`), when one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_time_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_run_time_from: Option<String>,
}

impl Scheduling {
    /// Whether there is anything to tell: a lowered band or a wait.
    pub fn changed_anything(&self) -> bool {
        self.asked.is_some() || self.waited_ms > 0 || self.passed_over > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_parse_order_and_map_to_vllm_ranks() {
        assert_eq!("Batch".parse::<Priority>(), Ok(Priority::Offline));
        assert_eq!(" online ".parse::<Priority>(), Ok(Priority::Online));
        assert!("urgent".parse::<Priority>().unwrap_err().contains("urgent"));
        assert!(Priority::Interactive < Priority::Online && Priority::Online < Priority::Offline);
        for p in Priority::ALL {
            assert_eq!(Priority::from_rank(i64::from(p.rank())), p);
            assert_eq!(Priority::ALL[p.index()], p);
        }
        assert_eq!(Priority::from_rank(5), Priority::Offline);
        let p: Priority = serde_json::from_str("\"batch\"").unwrap();
        assert_eq!(p, Priority::Offline);
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"offline\"");
    }
}
