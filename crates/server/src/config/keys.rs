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

pub use glassbox_app::service::limiter::RateLimit;

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
