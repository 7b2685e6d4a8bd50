//! The server config file (TOML) and the resolved [`Config`].
//!
//! API keys are never stored in clear: the file holds the SHA-256 of each key
//! (hex), so a leaked config does not leak credentials. A key from
//! `GLASSBOX_API_KEY` is hashed on start and gets every scope.
//!
//! ```toml
//! host = "0.0.0.0"             # needs at least one key
//! port = 8080
//! body_limit_bytes = 1048576
//! max_concurrency = 16         # in-flight requests per topology
//! cors_origins = ["https://app.example.com"]
//! max_embedding_inputs = 256   # inputs per /v1/embeddings request
//! max_queue = 0                # requests that may wait per topology when its
//!                              # slots are busy (0: refuse at once with 429)
//!
//! [connections]                # every field optional; these are the defaults
//! header_timeout_ms = 10000    # from a request's first byte to its last header
//! body_timeout_ms = 30000      # from the headers to the body's last byte
//! idle_timeout_ms = 60000      # a keep-alive connection with no request
//! max_per_client = 512         # open connections per client IP address
//!
//! [rate_limit]                 # per key (token bucket); absent: no limit
//! requests_per_second = 20.0   # units of work: an embedding input is one
//! burst = 40
//! tokens_per_minute = 200000   # optional: estimated tokens (prompt + max_tokens)
//! # or: requests_per_minute = 600 (burst defaults to the minute's requests)
//!
//! [priorities]                 # see `crate::service::queue`
//! max_passed_over = 4          # a waiting lower band sits out at most 4 grants
//!
//! [store]
//! durability = "commit"        # default: answer only once the trace has committed;
//!                              # "async": answer at once (a crash can lose traces)
//!
//! [outbound]                   # what nodes may reach despite the deny list
//! allow_ranges = ["10.20.0.0/16"]  # loopback, link-local, private: refused unless listed
//!
//! [secrets]                    # what `${env:…}`/`${file:…}` may read: see [`secrets`]
//! env = ["OPENAI_API_KEY"]     # never the server's own (GLASSBOX_*, ...)
//!
//! [topologies.rag-chat]
//! max_concurrency = 2
//! max_queue = 8                # waiting requests, ordered by priority band
//! max_run_time = "30s"         # a request running longer ends with 504
//! promoted = "1.2.0"           # the version that takes traffic at start
//!                              # (default: the first one loaded)
//!
//! [cluster]                    # `glassbox serve --cluster`: see [`cluster`]
//! placement = "scored"         # or "round_robin", "random"
//!
//! [alerts]                     # drift alerts: see `crate::alerts` for every field
//! window = "1h"
//! baseline = "24h"
//!
//! [[keys]]
//! name = "ci"
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//! scopes = ["run", "read"]
//! rate_limit = { requests_per_second = 5.0, burst = 5 }
//!
//! [[keys]]
//! name = "nightly"
//! sha256 = "…"
//! scopes = ["run"]
//! max_priority = "offline"     # its requests run in the offline band at most
//! max_run_time = "10m"
//! rate_limit = { requests_per_minute = 60, tokens_per_minute = 100000 }
//! ```

//!
//! The settings sit at the bottom of the server: they import no feature
//! module; the features (admission, keys, alerts, GPU monitoring, the
//! cluster) read them.

mod alerts;
pub mod cluster;
mod keys;
pub mod secrets;
mod serving;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use glassbox_nodes::outbound::IpRange;

pub use alerts::{AlertSettings, GpuAlertSettings};
pub use keys::{ApiKey, KeySpec, RateLimit, Scope, sha256_hex};
pub use serving::{
    Connections, DEFAULT_MAX_PASSED_OVER, Durability, OutboundSettings, Priorities, StoreSettings,
    TopologySettings, parse_run_time,
};

use crate::error::ServerError;

/// Default request body limit: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;
/// Default in-flight requests per topology.
pub const DEFAULT_MAX_CONCURRENCY: usize = 16;
/// Default port.
pub const DEFAULT_PORT: u16 = 8080;
/// Default cap on the inputs of one `/v1/embeddings` request.
pub const DEFAULT_MAX_EMBEDDING_INPUTS: usize = 256;
/// Default waiting requests per topology: none, a full topology refuses.
pub const DEFAULT_MAX_QUEUE: usize = 0;
/// The config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub body_limit_bytes: Option<usize>,
    pub max_concurrency: Option<usize>,
    #[serde(default)]
    pub cors_origins: Vec<String>,
    pub max_embedding_inputs: Option<usize>,
    pub max_queue: Option<usize>,
    #[serde(default)]
    pub connections: Connections,
    pub rate_limit: Option<RateLimit>,
    #[serde(default)]
    pub priorities: Priorities,
    #[serde(default)]
    pub topologies: BTreeMap<String, TopologySettings>,
    #[serde(default)]
    pub keys: Vec<KeySpec>,
    #[serde(default)]
    pub outbound: OutboundSettings,
    #[serde(default)]
    pub store: StoreSettings,
    #[serde(default)]
    pub alerts: AlertSettings,
    #[serde(default)]
    pub cluster: cluster::ClusterSection,
    #[serde(default)]
    pub secrets: secrets::SecretsSection,
    /// `[ingest]`: the OTLP receiver's hold and the model price table.
    #[serde(default)]
    pub ingest: glassbox_ingest::IngestSettings,
}

/// Resolved settings (file, then command-line overrides applied by the caller).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub host: Option<String>,
    pub port: u16,
    pub body_limit_bytes: usize,
    pub max_concurrency: usize,
    pub cors_origins: Vec<String>,
    pub max_embedding_inputs: usize,
    pub max_queue: usize,
    pub connections: Connections,
    pub rate_limit: Option<RateLimit>,
    pub priorities: Priorities,
    pub topologies: BTreeMap<String, TopologySettings>,
    pub keys: Vec<ApiKey>,
    /// Ranges outbound calls may reach despite the deny list.
    pub outbound_allow: Vec<IpRange>,
    /// What topologies' secret references may read, and where credentials go.
    pub secrets: glassbox_topology::secret_access::SecretAccess,
    pub store: StoreSettings,
    /// Drift alerts: windows, interval, thresholds.
    pub alerts: AlertSettings,
    /// How `--cluster` places, times out, fails over and probes (`[cluster]`).
    pub dispatch: glassbox_nodes::cluster::DispatchOptions,
    /// The OTLP receiver (`[ingest]`): hold, price table.
    pub ingest: glassbox_ingest::IngestSettings,
}

impl Default for Config {
    fn default() -> Self {
        Config::from_file(ConfigFile::default())
    }
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ServerError> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::ConfigIo {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text).map_err(|message| ServerError::Config {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parses config text; the error names the field and what is wrong.
    pub fn parse(text: &str) -> Result<Config, String> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut problems = Vec::new();
        for (i, k) in file.keys.iter().enumerate() {
            let hash = &k.sha256;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                problems.push(format!(
                    "keys[{i}] (`{}`): `sha256` must be 64 hex digits (hint: `printf %s KEY | sha256sum`)",
                    k.name
                ));
            }
            if k.scopes.is_empty() {
                problems.push(format!(
                    "keys[{i}] (`{}`): `scopes` is empty (expected some of run, read, admin)",
                    k.name
                ));
            }
        }
        let limits = file
            .rate_limit
            .iter()
            .chain(file.keys.iter().filter_map(|k| k.rate_limit.as_ref()));
        for r in limits {
            if !(r.requests_per_second > 0.0 && r.requests_per_second.is_finite()) || r.burst == 0 {
                problems.push(format!(
                    "rate_limit: `requests_per_second` must be > 0 and `burst` >= 1 (got {} and {})",
                    r.requests_per_second, r.burst
                ));
            }
            if r.tokens_per_minute == Some(0) {
                problems.push("rate_limit: `tokens_per_minute` must be at least 1".into());
            }
        }
        let c = &file.connections;
        for (name, ms) in [
            ("header_timeout_ms", c.header_timeout_ms),
            ("body_timeout_ms", c.body_timeout_ms),
            ("idle_timeout_ms", c.idle_timeout_ms),
        ] {
            if ms == 0 {
                problems.push(format!("connections: `{name}` must be at least 1"));
            }
        }
        if c.max_per_client == 0 {
            problems.push("connections: `max_per_client` must be at least 1".into());
        }
        if file.max_embedding_inputs == Some(0) {
            problems.push("`max_embedding_inputs` must be at least 1".into());
        }
        if file.body_limit_bytes == Some(0) {
            problems.push("`body_limit_bytes` must be at least 1".into());
        }
        for (i, k) in file.keys.iter().enumerate() {
            if let Some(Err(e)) = k.max_run_time.as_deref().map(parse_run_time) {
                problems.push(format!("keys[{i}] (`{}`): `max_run_time`: {e}", k.name));
            }
        }
        for (id, t) in &file.topologies {
            if let Some(Err(e)) = t.max_run_time.as_deref().map(parse_run_time) {
                problems.push(format!("topologies.{id}: `max_run_time`: {e}"));
            }
        }
        if file.priorities.max_passed_over == 0 {
            problems.push(
                "priorities: `max_passed_over` must be at least 1 (with 0 a lower band would be served as often as a higher one)".into(),
            );
        }
        if file.max_concurrency == Some(0)
            || file
                .topologies
                .values()
                .any(|t| t.max_concurrency == Some(0))
        {
            problems.push("`max_concurrency` must be at least 1".into());
        }
        for (i, r) in file.outbound.allow_ranges.iter().enumerate() {
            if IpRange::parse(r).is_none() {
                problems.push(format!(
                    "outbound.allow_ranges[{i}]: `{r}` is not an address or a range (write e.g. `10.0.0.0/8` or `127.0.0.1`)"
                ));
            }
        }
        problems.extend(file.alerts.problems());
        if let Err(found) = file.cluster.resolve() {
            problems.extend(found);
        }
        if let Err(found) = file.secrets.resolve() {
            problems.extend(found);
        }
        if problems.is_empty() {
            Ok(Config::from_file(file))
        } else {
            Err(problems.join("; "))
        }
    }

    fn from_file(file: ConfigFile) -> Config {
        Config {
            host: file.host,
            port: file.port.unwrap_or(DEFAULT_PORT),
            body_limit_bytes: file.body_limit_bytes.unwrap_or(DEFAULT_BODY_LIMIT),
            max_concurrency: file.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY),
            cors_origins: file.cors_origins,
            max_embedding_inputs: file
                .max_embedding_inputs
                .unwrap_or(DEFAULT_MAX_EMBEDDING_INPUTS),
            max_queue: file.max_queue.unwrap_or(DEFAULT_MAX_QUEUE),
            priorities: file.priorities,
            connections: file.connections,
            store: file.store,
            alerts: file.alerts,
            ingest: file.ingest,
            dispatch: file.cluster.resolve().unwrap_or_default(),
            secrets: file.secrets.resolve().unwrap_or_default(),
            rate_limit: file.rate_limit,
            topologies: file.topologies,
            outbound_allow: file
                .outbound
                .allow_ranges
                .iter()
                .filter_map(|r| IpRange::parse(r))
                .collect(),
            keys: file
                .keys
                .into_iter()
                .map(|k| ApiKey {
                    name: k.name,
                    sha256: k.sha256.to_ascii_lowercase(),
                    scopes: k.scopes,
                    rate_limit: k.rate_limit,
                    max_priority: k.max_priority,
                    max_run_time: k
                        .max_run_time
                        .as_deref()
                        .and_then(|t| parse_run_time(t).ok()),
                })
                .collect(),
        }
    }

    /// Adds a clear-text key (from `GLASSBOX_API_KEY`) with every scope.
    pub fn add_env_key(&mut self, key: &str) {
        self.keys.push(ApiKey {
            name: "env".into(),
            sha256: sha256_hex(key),
            scopes: vec![Scope::Admin],
            rate_limit: None,
            max_priority: None,
            max_run_time: None,
        });
    }

    /// The version the config promotes at start, per topology id.
    pub fn promoted_versions(&self) -> BTreeMap<String, String> {
        self.topologies
            .iter()
            .filter_map(|(id, t)| Some((id.clone(), t.promoted.clone()?)))
            .collect()
    }

    /// In-flight limit for one topology.
    pub fn concurrency_for(&self, topology: &str) -> usize {
        self.topologies
            .get(topology)
            .and_then(|t| t.max_concurrency)
            .unwrap_or(self.max_concurrency)
            .max(1)
    }

    /// Requests that may wait for a slot of one topology.
    pub fn queue_for(&self, topology: &str) -> usize {
        self.topologies
            .get(topology)
            .and_then(|t| t.max_queue)
            .unwrap_or(self.max_queue)
    }

    /// The maximum run time set for one topology, if any.
    pub fn run_time_for(&self, topology: &str) -> Option<Duration> {
        self.topologies
            .get(topology)
            .and_then(|t| t.max_run_time.as_deref())
            .and_then(|t| parse_run_time(t).ok())
    }

    /// Whether requests must carry a key.
    pub fn auth_required(&self) -> bool {
        !self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests;
