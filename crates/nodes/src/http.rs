//! `http`: calls a URL, only on hosts the config allows.

use glassbox_topology::{Code, Cx, Diagnostic, KindSchema, Value};

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

/// The `http` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Http;

/// The host part of an http(s) URL.
pub fn host_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then_some(host)
}

impl KindSchema for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    fn summary(&self) -> &'static str {
        "calls a URL with a timeout; the host must be in `allow_hosts` (empty by default), internal addresses must be named there, redirects are off unless `max_redirects` is set"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let obj = check::config(config, cx);
        check::require(
            obj.as_ref(),
            cx,
            "url",
            "set the URL to call, e.g. `url: https://api.example.com/lookup`",
        );
        let Some(obj) = obj else { return };
        obj.deny_unknown(cx, FIELDS);
        let allow = obj.str_list(cx, "allow_hosts").unwrap_or_default();
        if let Some(m) = obj.str(cx, "method") {
            check::one_of(
                &m,
                &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                cx,
                "method",
            );
        }
        obj.obj(cx, "headers");
        obj.uint(cx, "timeout_ms", 1, 3_600_000);
        obj.uint(cx, "max_redirects", 0, crate::outbound::MAX_REDIRECTS_LIMIT);
        let Some(url) = obj.str(cx, "url") else {
            return;
        };
        // A URL from a secret reference is checked when the node is built.
        if glassbox_topology::secret::has_reference(&url.value) {
            return;
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
    }
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
