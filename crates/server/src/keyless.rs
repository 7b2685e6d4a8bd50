//! Keyless mode: with no API key configured the server listens on 127.0.0.1
//! only and every caller has every scope. Loopback alone does not keep web
//! pages out: a page on any site can make the browser send requests to
//! `127.0.0.1`, either directly (a "simple" cross-site `POST` needs no CORS
//! preflight, so it runs even though the page cannot read the answer) or by
//! DNS rebinding (a name the attacker controls re-resolved to 127.0.0.1, so
//! the page is same-origin with the server from the browser's point of view,
//! and can read answers too).
//!
//! This middleware closes both, only while no key is configured (with keys,
//! a page has no key to send):
//!
//! - the `Host` header must name loopback (`localhost`, an IPv4 loopback
//!   address, `[::1]`, any port): a rebound name arrives as `Host:
//!   evil.example` and is refused;
//! - a state-changing request (`POST`, `PUT`, `PATCH`, `DELETE`) whose
//!   `Origin` is not the server's own (`http://` + its `Host`) nor listed in
//!   `cors_origins` is refused, as is one marked `Sec-Fetch-Site:
//!   cross-site` by the browser. Clients that are not browsers send no
//!   `Origin` and are not affected.
//!
//! Both answer 403 with a JSON error that says why and what to configure.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use crate::config::Config;
use crate::error::ApiError;

/// What the middleware needs: whether keys are required, and the config.
#[derive(Debug, Clone)]
pub struct Keyless {
    pub keys_required: bool,
    pub config: Arc<Config>,
}

/// The middleware; a no-op when API keys are configured.
pub async fn guard(State(keyless): State<Keyless>, req: Request, next: Next) -> Response {
    if keyless.keys_required {
        return next.run(req).await;
    }
    match check(&keyless.config, req.method(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// Whether a keyless server may answer this request.
pub fn check(config: &Config, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("(not text)"));
    // A request without `Host` (HTTP/1.0) does not come from a browser.
    if let Some(host) = host
        && !is_loopback_host(host)
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            format!(
                "`Host: {host}` is not a loopback name; without API keys this server answers \
                 only requests addressed to localhost, 127.0.0.1 or [::1] (this blocks DNS rebinding)"
            ),
        )
        .hint(
            "open the server as http://127.0.0.1:PORT, or configure an API key \
             (GLASSBOX_API_KEY or [[keys]] in the config file) to serve other names",
        ));
    }
    let changes_state = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    if !changes_state {
        return Ok(());
    }
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or(""));
    let own = host.map(|h| format!("http://{h}"));
    let cross_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"));
    let allowed = match origin {
        None => !cross_site,
        Some(o) => {
            own.as_deref()
                .is_some_and(|own| o.eq_ignore_ascii_case(own))
                || config.cors_origins.iter().any(|c| c == "*" || c == o)
        }
    };
    if allowed {
        return Ok(());
    }
    let from = origin.map_or_else(
        || "a cross-site page".to_string(),
        |o| format!("origin `{o}`"),
    );
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "cross_origin_forbidden",
        format!(
            "a `{method}` from {from} was refused: without API keys this server accepts \
             requests that change state only from its own origin ({}), so that web pages \
             cannot drive it",
            own.as_deref().unwrap_or("http://127.0.0.1:PORT")
        ),
    )
    .hint(
        "configure an API key (GLASSBOX_API_KEY or [[keys]] in the config file), \
         or add the origin to `cors_origins` in the server config",
    ))
}

/// `localhost`, an IPv4 loopback address or `[::1]`, with any port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        match rest.split_once(']') {
            Some((v6, tail)) if tail.is_empty() || tail.strip_prefix(':').is_some_and(is_port) => {
                return v6
                    .parse::<std::net::Ipv6Addr>()
                    .is_ok_and(|ip| ip.is_loopback());
            }
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// 1 to 5 digits.
fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_any_port() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:1",
            "127.1.2.3:65535",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.1",
            "[::2]:80",
            "[::1]x",
            "localhost:",
            "localhost:80:80",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn state_changes_only_from_the_own_origin_or_listed_ones() {
        let c = Config::default();
        let own = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert!(check(&c, &Method::POST, &headers(&own)).is_ok());
        assert!(check(&c, &Method::POST, &headers(&[("host", "127.0.0.1:8080")])).is_ok());
        let evil = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ];
        let e = check(&c, &Method::POST, &headers(&evil)).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (403, "cross_origin_forbidden"));
        assert!(
            check(&c, &Method::GET, &headers(&evil)).is_ok(),
            "reads pass"
        );
        let other_port = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://localhost:3000"),
        ];
        assert!(check(&c, &Method::DELETE, &headers(&other_port)).is_err());
        let fetch = [("host", "localhost:8080"), ("sec-fetch-site", "cross-site")];
        assert!(check(&c, &Method::PUT, &headers(&fetch)).is_err());
        let listed = Config::parse("cors_origins = [\"http://evil.example\"]").unwrap();
        assert!(check(&listed, &Method::POST, &headers(&evil)).is_ok());
    }
}
