//! API keys as the config file gives them (their SHA-256, never the key),
//! what each may do ([`Scope`]) and how much ([`RateLimit`]).

use std::time::Duration;

use glassbox_trace::Priority;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// Lowercase hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
