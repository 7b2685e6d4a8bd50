//! The HTTP side of the load: one `ureq` agent (a keep-alive pool) shared
//! by every sender thread, the run call, and the trace check.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::config::Config;
use crate::stats::Outcome;

/// The HTTP side: one agent (keep-alive pool) shared by every thread.
pub struct Client {
    agent: ureq::Agent,
    runs_url: String,
    pub base: String,
    auth: Option<String>,
}

/// What one answer said.
pub struct Answer {
    pub outcome: Outcome,
    pub request_id: Option<String>,
}

impl Client {
    pub fn new(config: &Config, connections: usize) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .max_idle_connections(connections.max(1))
            .max_idle_connections_per_host(connections.max(1))
            .build()
            .into();
        let base = config.url.trim_end_matches('/').to_string();
        Client {
            agent,
            runs_url: format!("{base}/v1/topologies/{}/runs", config.topology),
            base,
            auth: config.api_key.as_ref().map(|k| format!("Bearer {k}")),
        }
    }

    pub fn run(&self, body: &[u8]) -> Answer {
        let mut req = self
            .agent
            .post(&self.runs_url)
            .header("content-type", "application/json");
        if let Some(auth) = &self.auth {
            req = req.header("authorization", auth);
        }
        let mut response = match req.send(body) {
            Ok(r) => r,
            Err(e) => {
                return Answer {
                    outcome: Outcome::Transport(transport_kind(&e)),
                    request_id: None,
                };
            }
        };
        let status = response.status().as_u16();
        let header_id = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // Read the whole body, so the connection can be reused.
        let text = match response.body_mut().read_to_string() {
            Ok(t) => t,
            Err(e) => {
                return Answer {
                    outcome: Outcome::Transport(transport_kind(&e)),
                    request_id: None,
                };
            }
        };
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        let field = |k: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let request_id = field("request_id").or(header_id);
        let outcome = match status {
            200..=299 if matches!(field("status").as_deref(), Some("error" | "failed")) => {
                Outcome::RunFailed
            }
            200..=299 => Outcome::Ok,
            429 => Outcome::Rejected,
            s => Outcome::Status(s),
        };
        Answer {
            outcome,
            request_id,
        }
    }

    /// `GET PATH`: the status, or the transport error.
    pub fn get(&self, path: &str) -> Result<u16, ureq::Error> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(auth) = &self.auth {
            req = req.header("authorization", auth);
        }
        let mut response = req.call()?;
        let _ = response.body_mut().read_to_vec();
        Ok(response.status().as_u16())
    }
}

pub fn transport_kind(e: &ureq::Error) -> &'static str {
    match e {
        ureq::Error::Timeout(_) => "timeout",
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => "connect",
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => "connect",
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => "timeout",
        ureq::Error::Io(_) => "io",
        ureq::Error::Protocol(_) => "protocol",
        _ => "other",
    }
}

/// The result of `--verify-traces`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceCheck {
    /// Answers that carried a request id: every admitted (2xx) request, and
    /// runs that failed after admission (4xx/5xx with a trace).
    pub checked: usize,
    pub found: usize,
    pub missing: usize,
    /// Admitted answers that carried no request id to look up.
    pub without_id: usize,
    /// Lookups that failed for another reason (status or transport), by cause.
    pub lookup_errors: BTreeMap<String, u64>,
    /// Up to ten missing request ids.
    pub missing_ids: Vec<String>,
}

/// Looks every id up; ids not found are retried for a few seconds, since
/// the server writes traces off the request path.
pub fn verify_traces(client: &Client, ids: Vec<String>, without_id: usize) -> TraceCheck {
    let mut check = TraceCheck {
        checked: ids.len(),
        without_id,
        ..TraceCheck::default()
    };
    let mut todo = ids;
    let mut errors = BTreeMap::new();
    for round in 0..6 {
        if round > 0 {
            thread::sleep(Duration::from_millis(500 * round));
        }
        let (missing, errs) = lookup_all(client, &todo);
        check.found += todo.len() - missing.len() - errs.len();
        errors = errs.into_iter().fold(BTreeMap::new(), |mut m, (_, cause)| {
            *m.entry(cause).or_insert(0) += 1;
            m
        });
        todo = missing;
        if todo.is_empty() {
            break;
        }
    }
    check.missing = todo.len();
    check.missing_ids = todo.into_iter().take(10).collect();
    check.lookup_errors = errors;
    check
}

/// Returns (ids answered 404, (id, cause) of other failures).
fn lookup_all(client: &Client, ids: &[String]) -> (Vec<String>, Vec<(String, String)>) {
    let next = AtomicU64::new(0);
    let missing = Mutex::new(Vec::new());
    let errors = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..8.min(ids.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(id) = ids.get(i) else { break };
                    let result = client.get(&format!("/v1/traces/{id}"));
                    let push = |m: &Mutex<Vec<_>>, v| match m.lock() {
                        Ok(mut g) => g.push(v),
                        Err(p) => p.into_inner().push(v),
                    };
                    match result {
                        Ok(200..=299) => {}
                        Ok(404) => push(&missing, (id.clone(), String::new())),
                        Ok(s) => push(&errors, (id.clone(), format!("http {s}"))),
                        Err(e) => push(&errors, (id.clone(), transport_kind(&e).to_string())),
                    }
                }
            });
        }
    });
    let take = |m: Mutex<Vec<(String, String)>>| m.into_inner().unwrap_or_else(|p| p.into_inner());
    (
        take(missing).into_iter().map(|(id, _)| id).collect(),
        take(errors),
    )
}
