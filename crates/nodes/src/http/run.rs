//! `http` at run time: one call to a URL on an allowed host, with a timeout.
//!
//! Uses `ureq` (small, synchronous, rustls) on the blocking pool rather than
//! an async client: one call per attempt needs no connection juggling, and
//! it keeps tokio's network stack out of the build. 5xx answers and
//! transport errors are retryable; 4xx are not.
//!
//! Every request goes through [`crate::outbound`]: the allowlist and the
//! deny list are checked on every hop, redirects are off unless
//! `max_redirects` is set, headers never follow a redirect to another
//! origin, and an error answer's body stays out of the caller's error.
//!
//! Output: `{"status": <code>, "body": <JSON or text>}`.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput};
use serde_json::{Value, json};

use super::config::{HttpConfig, host_of};
use crate::outbound::{Client, ClientOptions, Request, ServerAllow, display_url, upstream_error};

/// Largest response body read, in bytes.
const MAX_BODY: u64 = 4 * 1024 * 1024;

struct Inner {
    client: Client,
    url: String,
    method: String,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

/// A built HTTP node.
pub struct HttpNode {
    inner: Arc<Inner>,
}

/// Sets up the client with the node's allowlist, redirect limit and
/// timeout, and checks the URL's host against the outbound policy.
pub(crate) fn build(
    config: &HttpConfig,
    node_timeout: Duration,
    server: Option<&ServerAllow>,
) -> Result<HttpNode, BuildError> {
    let url = config
        .url
        .as_deref()
        .ok_or_else(|| BuildError::config("`url` is missing"))?;
    let host = host_of(url).ok_or_else(|| {
        BuildError::config(format!("`{}` is not an http(s) URL", display_url(url)))
    })?;
    let timeout = config
        .timeout_ms
        .map_or(node_timeout, Duration::from_millis);
    let max_redirects = config
        .max_redirects
        .unwrap_or(0)
        .min(crate::outbound::MAX_REDIRECTS_LIMIT) as u32;
    let client = Client::new(
        ClientOptions {
            allow_hosts: config.allow_hosts.clone(),
            restrict_hosts: true,
            max_redirects,
            timeout,
        },
        server,
    );
    client
        .policy()
        .check_static(host)
        .map_err(|e| BuildError::config(e.to_string()))?;
    Ok(HttpNode {
        inner: Arc::new(Inner {
            client,
            url: url.to_string(),
            method: config
                .method
                .as_deref()
                .unwrap_or("GET")
                .to_ascii_uppercase(),
            headers: config.headers.clone(),
            body: config.body.clone(),
        }),
    })
}

impl Inner {
    fn call(&self, input: &Value) -> Result<NodeOutput, NodeError> {
        let body = match self.method.as_str() {
            "GET" | "HEAD" | "DELETE" => None,
            _ => Some(self.body.as_ref().unwrap_or(input).to_string()),
        };
        let answer = self
            .client
            .send(Request {
                method: &self.method,
                url: &self.url,
                headers: &self.headers,
                body: body.as_deref().map(str::as_bytes),
            })
            .map_err(|e| e.into_node_error())?;
        let host = answer.host;
        let mut response = answer.response;
        let status = response.status().as_u16();
        let mut text = String::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_BODY)
            .read_to_string(&mut text)
            .map_err(|e| NodeError::Unavailable(format!("reading the answer of {host}: {e}")))?;
        if status >= 400 {
            let err = upstream_error(&host, status, &text);
            return Err(match err {
                // 4xx: the request itself is wrong; not retried.
                NodeError::Upstream { message, .. } if status < 500 && status != 429 => {
                    NodeError::Rejected(message)
                }
                other => other,
            });
        }
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        let mut out = NodeOutput::new(json!({ "status": status, "body": body }))
            .tag("host", host.clone())
            .tag("status", status.to_string());
        if !answer.hops.is_empty() {
            out = out.tag("redirects", answer.hops.join(" -> "));
        }
        Ok(out.fact(Fact::Http { host, status }))
    }
}

impl HttpNode {
    /// One call with `input` as the body (an agent's tool call); blocking.
    pub(crate) fn call_with(&self, input: &Value) -> Result<NodeOutput, NodeError> {
        self.inner.call(input)
    }
}

impl Node for HttpNode {
    fn call(&self, cx: NodeCx) -> Call {
        let inner = self.inner.clone();
        Call::blocking(move || inner.call(cx.input()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> HttpConfig {
        crate::check::typed(&super::super::Http, yaml)
    }

    #[test]
    fn hosts_must_be_allowed() {
        let t = Duration::from_secs(1);
        assert!(build(&config("url: https://example.com/x"), t, None).is_err());
        assert!(
            build(
                &config("{url: 'https://example.com/x', allow_hosts: [example.com]}"),
                t,
                None
            )
            .is_ok()
        );
    }
}
