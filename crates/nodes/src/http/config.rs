//! The `http` config, read once, and the URL host rule shared with the
//! OpenAI-compatible client.

use std::collections::BTreeMap;

use glassbox_topology::{Code, Cx, Diagnostic, Value};

use crate::check;

pub const FIELDS: &[&str] = &[
    "url",
    "method",
    "headers",
    "body",
    "allow_hosts",
    "max_redirects",
    "timeout_ms",
];

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];

/// A checked `http` config.
#[derive(Debug, Clone, Default)]
pub struct HttpConfig {
    /// Required; absent in a sketch (a node without `config`).
    pub url: Option<String>,
    /// Default `GET`.
    pub method: Option<String>,
    /// Header name → value (non-string values as JSON text), sorted by name.
    pub headers: Vec<(String, String)>,
    /// The body sent (default: the request input) for methods with one.
    pub body: Option<serde_json::Value>,
    pub allow_hosts: Vec<String>,
    pub max_redirects: Option<u64>,
    pub timeout_ms: Option<u64>,
}

pub use crate::outbound::url_host as host_of;

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> HttpConfig {
    let mut out = HttpConfig::default();
    let obj = check::config(config, cx);
    check::require(
        obj.as_ref(),
        cx,
        "url",
        "set the URL to call, e.g. `url: https://api.example.com/lookup`",
    );
    let Some(obj) = obj else { return out };
    obj.deny_unknown(cx, FIELDS);
    let allow = obj.str_list(cx, "allow_hosts").unwrap_or_default();
    out.allow_hosts = allow.iter().map(|a| a.value.clone()).collect();
    if let Some(m) = obj.str(cx, "method") {
        check::one_of(&m, METHODS, cx, "method");
        out.method = Some(m.value);
    }
    if obj.obj(cx, "headers").is_some()
        && let Some(serde_json::Value::Object(headers)) = obj.get("headers").map(Value::to_json)
    {
        let sorted: BTreeMap<String, serde_json::Value> = headers.into_iter().collect();
        out.headers = sorted
            .into_iter()
            .map(|(k, v)| {
                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                (k, v)
            })
            .collect();
    }
    out.body = obj.get("body").map(Value::to_json);
    out.timeout_ms = obj.uint(cx, "timeout_ms", 1, 3_600_000).map(|n| n.value);
    out.max_redirects = obj
        .uint(cx, "max_redirects", 0, crate::outbound::MAX_REDIRECTS_LIMIT)
        .map(|n| n.value);
    let Some(url) = obj.str(cx, "url") else {
        return out;
    };
    out.url = Some(url.value.clone());
    // A URL from a secret reference is checked when the node is built.
    if glassbox_topology::secret::has_reference(&url.value) {
        return out;
    }
    let shown = glassbox_topology::secret::strip_userinfo(&url.value);
    match host_of(&url.value) {
        None => cx.report(
            Diagnostic::error(Code::BadConfig, url.span, format!("`url` `{shown}` is not an http(s) URL"))
                .at(cx.path_of("url"))
                .hint("write e.g. `https://api.example.com/lookup`"),
        ),
        Some(host) if !allow.iter().any(|a| a.value == host) => cx.report(
            Diagnostic::error(
                Code::BadConfig,
                url.span,
                format!("host `{host}` is not in `allow_hosts`"),
            )
            .at(cx.path_of("url"))
            .hint(format!("outbound calls are denied by default; add `allow_hosts: [{host}]` if this call is intended")),
        ),
        Some(_) => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_extracted() {
        assert_eq!(
            host_of("https://api.example.com/x?y"),
            Some("api.example.com")
        );
        assert_eq!(host_of("http://user@localhost:8080/"), Some("localhost"));
        assert_eq!(host_of("http://[::1]:80/"), Some("::1"));
        assert_eq!(host_of("ftp://x"), None);
    }
}
