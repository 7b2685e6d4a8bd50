//! A worker as the pool sees it: its [`WorkerRecord`] (written once when it
//! registers) and its [`Load`] (refreshed about every second), both JSON
//! values under the worker's etcd lease.
//!
//! Keys (`prefix` defaults to [`DEFAULT_PREFIX`]):
//! - `{prefix}/workers/{id}`: the record;
//! - `{prefix}/load/{id}`: the latest load.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// Where Glassbox keeps its keys in etcd unless told otherwise.
pub const DEFAULT_PREFIX: &str = "/glassbox";

/// The etcd key of a worker's record.
pub fn record_key(prefix: &str, id: &str) -> String {
    format!("{prefix}/workers/{id}")
}

/// The etcd key of a worker's load.
pub fn load_key(prefix: &str, id: &str) -> String {
    format!("{prefix}/load/{id}")
}

/// What a worker registers: who it is, where to reach it and what it can run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// Unique per process: a restarted worker is a new member.
    pub id: String,
    /// Base URL of its OpenAI-compatible API (`http://10.0.0.7:8090`):
    /// `/v1/chat/completions`, `/v1/embeddings`, `/metrics`.
    pub address: String,
    /// `glassbox` for `glassbox worker`; `vllm`, `sglang`, `llama.cpp` for
    /// an attached server.
    pub engine: String,
    pub hardware: Hardware,
    /// Model names as its API serves them.
    pub models: Vec<String>,
    /// Node kinds it runs (`llm_inference`, `embedding`, `vector_search`).
    pub node_kinds: Vec<String>,
    /// Free-form labels (`zone=a`, `tier=spot`) placement may filter on.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Seconds since the Unix epoch when it registered.
    pub started_at: u64,
}

/// The machine a worker runs on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// GPUs seen through NVML; empty on a CPU-only worker.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    pub cpu_model: String,
    pub cpu_cores: u32,
    pub memory_bytes: u64,
}

impl Hardware {
    /// A short name for profiles and explanations: the first GPU's model,
    /// else the CPU's.
    pub fn name(&self) -> &str {
        self.gpus
            .first()
            .map_or(self.cpu_model.as_str(), |g| g.name.as_str())
    }
}

/// One GPU, as NVML names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    pub name: String,
    pub memory_bytes: u64,
    /// CUDA compute capability, e.g. `9.0`.
    pub compute_capability: Option<String>,
}

/// A worker's load, in the terms of vLLM's metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// `num_requests_running`.
    pub running: u64,
    /// `num_requests_waiting`.
    pub waiting: u64,
    /// `kv_cache_usage_perc`, 0–1.
    pub kv_usage: f64,
    /// Output tokens per second over the last interval.
    pub tokens_per_second: f64,
    /// Seconds since the Unix epoch when it was measured.
    pub at: u64,
    /// The same instant in milliseconds (workers of this version): tells
    /// a coordinator which of its calls the report already counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
}

impl Load {
    /// When it was measured, in milliseconds since the Unix epoch (to the
    /// second for reports that carry only `at`).
    pub fn measured_ms(&self) -> u64 {
        self.at_ms.unwrap_or(self.at.saturating_mul(1000))
    }
}

/// A worker the pool knows: its record and, once reported, its load.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub record: WorkerRecord,
    pub load: Option<Load>,
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Nanoseconds since the Unix epoch, now (unique names for temp files).
#[cfg(any(test, feature = "test-support"))]
pub(crate) fn now_secs_nanos() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_put_records_and_loads_under_their_own_prefixes() {
        assert_eq!(record_key("/g", "w1"), "/g/workers/w1");
        assert_eq!(load_key("/g", "w1"), "/g/load/w1");
    }

    #[test]
    fn a_record_round_trips_through_json() {
        let r = WorkerRecord {
            id: "w1".into(),
            address: "http://127.0.0.1:1".into(),
            engine: "glassbox".into(),
            hardware: Hardware {
                gpus: vec![Gpu {
                    name: "NVIDIA H200".into(),
                    memory_bytes: 141 << 30,
                    compute_capability: Some("9.0".into()),
                }],
                cpu_model: "x".into(),
                cpu_cores: 16,
                memory_bytes: 1 << 30,
            },
            models: vec!["smollm2".into()],
            node_kinds: vec!["llm_inference".into()],
            labels: Default::default(),
            started_at: 1,
        };
        let back: WorkerRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.hardware.name(), "NVIDIA H200");
    }
}
