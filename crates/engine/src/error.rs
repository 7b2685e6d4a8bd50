//! Errors at the engine's three boundaries: building a node
//! ([`BuildError`]), one node call ([`NodeError`]) and one request
//! ([`ExecError`]). Each has a stable `code()` for APIs and metrics.

use std::time::Duration;

/// Why a node kind could not build a runnable node.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("no node kind `{kind}` is registered")]
    UnknownKind { kind: String },
    #[error("bad config: {message}")]
    Config { message: String },
    #[error("{message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A secret reference in the config (`${env:NAME}`, `${file:/path}`)
    /// could not be resolved.
    #[error(transparent)]
    Secret(#[from] glassbox_topology::secret::SecretError),
}

impl BuildError {
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::UnknownKind { .. } => "unknown_kind",
            BuildError::Config { .. } => "bad_config",
            BuildError::Unavailable { .. } => "unavailable",
            BuildError::Secret(e) => e.code(),
        }
    }

    pub fn config(message: impl Into<String>) -> BuildError {
        BuildError::Config {
            message: message.into(),
        }
    }
}

/// One node that failed to build.
#[derive(Debug, thiserror::Error)]
#[error("node `{node}` (type `{kind}`): {error}")]
pub struct NodeBuildError {
    pub node: String,
    pub kind: String,
    #[source]
    pub error: BuildError,
}

/// Every node that failed to build, so all problems are reported at once.
#[derive(Debug, thiserror::Error)]
#[error("{} node(s) could not be built: {}", .errors.len(), list(.errors))]
pub struct PipelineError {
    pub errors: Vec<NodeBuildError>,
}

impl PipelineError {
    pub fn code(&self) -> &'static str {
        "build_failed"
    }
}

fn list(errors: &[NodeBuildError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why one call of a node failed.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The node's input cannot work; retrying will not help.
    #[error("bad input: {0}")]
    BadInput(String),
    /// A dependency (server, file) did not answer; worth retrying.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The node's resource is at capacity (a local model's queue is full):
    /// the request is refused at once rather than left to time out, and
    /// callers are told to come back (HTTP 429 with `Retry-After`).
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// The node's own check failed (e.g. a guard rule); not retried.
    #[error("{0}")]
    Rejected(String),
    /// An output guard asks the engine to re-run `upstream` and call it again.
    #[error("output of `{upstream}` rejected ({reason}); re-run requested")]
    RerunUpstream { upstream: String, reason: String },
    /// Any other failure.
    #[error("{message}")]
    Failed {
        message: String,
        retryable: bool,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("node panicked: {0}")]
    Panicked(String),
    /// A failure the node kind names with its own stable code (e.g. a
    /// custom step that trapped: `wasm_trap`), for spans, APIs and metrics.
    /// `detail` is kept in the span's error record only, like
    /// [`NodeError::Upstream`]'s.
    #[error("{message}")]
    Coded {
        code: &'static str,
        message: String,
        detail: Option<String>,
        retryable: bool,
    },
    /// A remote server answered with an error. `message` is a short, safe
    /// reason for callers (e.g. `api.example.com answered HTTP 503`);
    /// `detail` (status, an excerpt of the body) is kept in the span's error
    /// record for admins and never shown in a run's result.
    #[error("unavailable: {message}")]
    Upstream {
        message: String,
        detail: String,
        retryable: bool,
    },
}

impl NodeError {
    pub fn code(&self) -> &'static str {
        match self {
            NodeError::BadInput(_) => "bad_input",
            NodeError::Unavailable(_) => "unavailable",
            NodeError::Overloaded(_) => "overloaded",
            NodeError::Rejected(_) => "rejected",
            NodeError::RerunUpstream { .. } => "rerun_upstream",
            NodeError::Failed { .. } => "node_error",
            NodeError::Panicked(_) => "panicked",
            NodeError::Coded { code, .. } => code,
            NodeError::Upstream {
                retryable: true, ..
            } => "unavailable",
            NodeError::Upstream { .. } => "upstream_rejected",
        }
    }

    /// Whether another attempt may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            NodeError::Unavailable(_) | NodeError::Panicked(_) => true,
            NodeError::Failed { retryable, .. }
            | NodeError::Upstream { retryable, .. }
            | NodeError::Coded { retryable, .. } => *retryable,
            // Retrying at once would find the same full queue.
            NodeError::BadInput(_)
            | NodeError::Rejected(_)
            | NodeError::RerunUpstream { .. }
            | NodeError::Overloaded(_) => false,
        }
    }

    /// Admin-only detail kept in the span (see [`NodeError::Upstream`]).
    pub fn detail(&self) -> Option<&str> {
        match self {
            NodeError::Upstream { detail, .. } => Some(detail),
            NodeError::Coded { detail, .. } => detail.as_deref(),
            _ => None,
        }
    }

    /// A retryable failure with a message.
    pub fn failed(message: impl Into<String>) -> NodeError {
        NodeError::Failed {
            message: message.into(),
            retryable: true,
            source: None,
        }
    }
}

/// Why a request failed. Names the node and the attempt where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("node `{node}` failed on attempt {attempt}: {source}")]
    NodeFailed {
        node: String,
        attempt: u32,
        #[source]
        source: NodeError,
    },
    #[error("node `{node}` timed out on attempt {attempt} after {} ms", .after.as_millis())]
    NodeTimeout {
        node: String,
        attempt: u32,
        after: Duration,
    },
    #[error("node `{node}` failed and so did its fallback: {cause}")]
    FallbackFailed {
        node: String,
        fallback: String,
        #[source]
        cause: Box<ExecError>,
    },
    #[error("request deadline of {} ms exceeded while {} ran", .deadline.as_millis(), running(.node, *.attempt))]
    DeadlineExceeded {
        deadline: Duration,
        node: Option<String>,
        attempt: Option<u32>,
    },
    #[error("request cancelled by the caller")]
    Cancelled,
}

fn running(node: &Option<String>, attempt: Option<u32>) -> String {
    match (node, attempt) {
        (Some(n), Some(a)) => format!("`{n}` (attempt {a})"),
        (Some(n), None) => format!("`{n}`"),
        _ => "nothing".to_string(),
    }
}

impl ExecError {
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::NodeFailed { .. } => "node_failed",
            ExecError::NodeTimeout { .. } => "node_timeout",
            ExecError::FallbackFailed { .. } => "fallback_failed",
            ExecError::DeadlineExceeded { .. } => "deadline_exceeded",
            ExecError::Cancelled => "cancelled",
        }
    }

    /// The node the error is about (for a failed fallback: the fallback).
    pub fn node(&self) -> Option<&str> {
        match self {
            ExecError::NodeFailed { node, .. } | ExecError::NodeTimeout { node, .. } => Some(node),
            ExecError::FallbackFailed { cause, .. } => cause.node(),
            ExecError::DeadlineExceeded { node, .. } => node.as_deref(),
            ExecError::Cancelled => None,
        }
    }

    /// The attempt that failed, where one did.
    pub fn attempt(&self) -> Option<u32> {
        match self {
            ExecError::NodeFailed { attempt, .. } | ExecError::NodeTimeout { attempt, .. } => {
                Some(*attempt)
            }
            ExecError::FallbackFailed { cause, .. } => cause.attempt(),
            ExecError::DeadlineExceeded { attempt, .. } => *attempt,
            ExecError::Cancelled => None,
        }
    }
}
