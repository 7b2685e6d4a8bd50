//! `http` at run time: one call to a URL on an allowed host, with a timeout.
//!
//! Uses `ureq` (small, synchronous, rustls) on the blocking pool rather than
//! an async client: one call per attempt needs no connection juggling, and
//! it keeps tokio's network stack out of the build. 5xx answers and
//! transport errors are retryable; 4xx are not.
//!
//! Output: `{"status": <code>, "body": <JSON or text>}`.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use glassbox_engine::trace::Fact;
use glassbox_engine::{
    BuildContext, BuildError, Call, Node, NodeCx, NodeError, NodeKind, NodeOutput,
};
use serde_json::{Value, json};

use crate::http::{Http, host_of};

/// Largest response body read, in bytes.
const MAX_BODY: u64 = 4 * 1024 * 1024;

struct Inner {
    agent: ureq::Agent,
    url: String,
    host: String,
    method: String,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

/// A built HTTP node.
pub struct HttpNode {
    inner: Arc<Inner>,
}

impl NodeKind for Http {
    fn build(
        &self,
        node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        build(&node.config, node.timeout).map(|h| Arc::new(h) as Arc<dyn Node>)
    }
}

fn build(config: &Value, node_timeout: Duration) -> Result<HttpNode, BuildError> {
    let url = config
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| BuildError::config("`url` is missing"))?;
    let host =
        host_of(url).ok_or_else(|| BuildError::config(format!("`{url}` is not an http(s) URL")))?;
    let allowed = config
        .get("allow_hosts")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|h| h.as_str() == Some(host)));
    if !allowed {
        return Err(BuildError::config(format!(
            "host `{host}` is not in `allow_hosts`"
        )));
    }
    let timeout = config
        .get("timeout_ms")
        .and_then(Value::as_u64)
        .map_or(node_timeout, Duration::from_millis);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let headers = config
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_string),
            )
        })
        .collect();
    Ok(HttpNode {
        inner: Arc::new(Inner {
            agent,
            url: url.to_string(),
            host: host.to_string(),
            method: config
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET")
                .to_string(),
            headers,
            body: config.get("body").cloned(),
        }),
    })
}

impl Inner {
    fn call(&self, input: &Value) -> Result<NodeOutput, NodeError> {
        let unavailable =
            |e: ureq::Error| NodeError::Unavailable(format!("{} {}: {e}", self.method, self.url));
        let mut response = match self.method.as_str() {
            "GET" | "HEAD" | "DELETE" => {
                let mut req = match self.method.as_str() {
                    "HEAD" => self.agent.head(&self.url),
                    "DELETE" => self.agent.delete(&self.url),
                    _ => self.agent.get(&self.url),
                };
                for (k, v) in &self.headers {
                    req = req.header(k, v);
                }
                req.call().map_err(unavailable)?
            }
            method => {
                let mut req = match method {
                    "PUT" => self.agent.put(&self.url),
                    "PATCH" => self.agent.patch(&self.url),
                    _ => self.agent.post(&self.url),
                };
                for (k, v) in &self.headers {
                    req = req.header(k, v);
                }
                let body = self.body.as_ref().unwrap_or(input).to_string();
                req.content_type("application/json")
                    .send(body.as_bytes())
                    .map_err(unavailable)?
            }
        };
        let status = response.status().as_u16();
        let mut text = String::new();
        response
            .body_mut()
            .as_reader()
            .take(MAX_BODY)
            .read_to_string(&mut text)
            .map_err(|e| {
                NodeError::Unavailable(format!("reading the response of {}: {e}", self.url))
            })?;
        if status >= 500 {
            return Err(NodeError::Unavailable(format!(
                "{} answered HTTP {status}",
                self.host
            )));
        }
        if status >= 400 {
            return Err(NodeError::Rejected(format!(
                "{} answered HTTP {status}",
                self.host
            )));
        }
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Ok(NodeOutput::new(json!({ "status": status, "body": body }))
            .tag("host", self.host.clone())
            .tag("status", status.to_string())
            .fact(Fact::Http {
                host: self.host.clone(),
                status,
            }))
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

    #[test]
    fn hosts_must_be_allowed() {
        let t = Duration::from_secs(1);
        assert!(build(&json!({"url": "https://example.com/x"}), t).is_err());
        assert!(
            build(
                &json!({"url": "https://example.com/x", "allow_hosts": ["example.com"]}),
                t
            )
            .is_ok()
        );
    }
}
