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

pub mod cluster;
pub mod secrets;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use glassbox_nodes::outbound::IpRange;
use glassbox_trace::Priority;

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
/// Default grants to higher bands a waiting lower band sits out.
pub const DEFAULT_MAX_PASSED_OVER: u32 = 4;

/// What a key may do. `admin` implies the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Run topologies: `/v1/topologies/{id}/runs`, `/v1/chat/completions`, `/v1/embeddings`.
    Run,
    /// Read topologies, traces and reports.
    Read,
    /// Everything, including `/v1/admin/*`.
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

/// Token buckets: `burst` units of work at once, refilled at
/// `requests_per_second`; a request costs one unit per run it makes (an
/// embeddings call: one per input). With `tokens_per_minute`, a second
/// bucket of that size counts estimated tokens (see [`crate::auth::Work`]).
///
/// Written either as `requests_per_second` with `burst`, or as
/// `requests_per_minute` (OpenAI's RPM: the bucket holds a minute's
/// requests unless `burst` says otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RateLimitSpec")]
pub struct RateLimit {
    pub requests_per_second: f64,
    pub burst: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
}

/// [`RateLimit`] as written in the file.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitSpec {
    requests_per_second: Option<f64>,
    requests_per_minute: Option<u32>,
    burst: Option<u32>,
    tokens_per_minute: Option<u64>,
}

impl TryFrom<RateLimitSpec> for RateLimit {
    type Error = String;

    fn try_from(r: RateLimitSpec) -> Result<RateLimit, String> {
        let (requests_per_second, burst) = match (r.requests_per_second, r.requests_per_minute) {
            (Some(rps), None) => (
                rps,
                r.burst
                    .ok_or("`requests_per_second` needs `burst` (the most runs at once)")?,
            ),
            (None, Some(rpm)) => (f64::from(rpm) / 60.0, r.burst.unwrap_or(rpm)),
            (Some(_), Some(_)) => {
                return Err(
                    "set `requests_per_second` or `requests_per_minute`, not both".to_string(),
                );
            }
            (None, None) => {
                return Err("a rate limit needs `requests_per_second` (with `burst`) or `requests_per_minute`".to_string());
            }
        };
        Ok(RateLimit {
            requests_per_second,
            burst,
            tokens_per_minute: r.tokens_per_minute,
        })
    }
}

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

/// One API key as written in the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySpec {
    /// Shown in logs and metrics instead of the key.
    pub name: String,
    /// Lowercase hex SHA-256 of the key (`printf %s KEY | sha256sum`).
    pub sha256: String,
    pub scopes: Vec<Scope>,
    /// Overrides the file's `[rate_limit]` for this key.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// The most urgent band this key's requests may run in (a request
    /// asking for more runs in this band).
    #[serde(default)]
    pub max_priority: Option<Priority>,
    /// The longest a request of this key may run (`30s`, `5m`).
    #[serde(default)]
    pub max_run_time: Option<String>,
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
    pub alerts: crate::alerts::AlertSettings,
    #[serde(default)]
    pub cluster: cluster::ClusterSection,
    #[serde(default)]
    pub secrets: secrets::SecretsSection,
    /// `[ingest]`: the OTLP receiver's hold and the model price table.
    #[serde(default)]
    pub ingest: glassbox_ingest::IngestSettings,
}

/// A key the server accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub name: String,
    /// Lowercase hex SHA-256.
    pub sha256: String,
    pub scopes: Vec<Scope>,
    pub rate_limit: Option<RateLimit>,
    pub max_priority: Option<Priority>,
    pub max_run_time: Option<Duration>,
}

impl ApiKey {
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes
            .iter()
            .any(|s| *s == scope || *s == Scope::Admin)
    }
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
    pub alerts: crate::alerts::AlertSettings,
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

/// Lowercase hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
#[path = "config_tests.rs"]
mod tests;
