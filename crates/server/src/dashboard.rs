//! The web dashboard: static files from `crates/server/assets/`, embedded at
//! compile time (see `build.rs`), served at `/` and `/assets/{file}`. They
//! are public; the dashboard's JavaScript calls the API with a key the user
//! enters (kept in the browser's localStorage) when the server needs one.
//!
//! Every dashboard response carries a strict Content-Security-Policy: scripts,
//! styles and data only from this server (the page has no inline script or
//! style; elements are styled through the CSSOM, which CSP allows), no
//! framing (`frame-ancestors 'none'`, and `X-Frame-Options` for old
//! browsers), no MIME sniffing, no referrer. The browser tests in
//! `tests/it/dashboard.rs` load every page under it and fail on any
//! violation the console reports.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};

use crate::api::extract::Path;

/// The dashboard's Content-Security-Policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// Security headers on every dashboard response (found or not).
fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let fixed: [(HeaderName, &'static str); 4] = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/assets.rs"));
}

/// Every embedded file, by name.
pub fn assets() -> &'static [(&'static str, &'static [u8])] {
    embedded::ASSETS
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("woff2") => "font/woff2",
        Some("txt" | "md") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn file(name: &str) -> Response {
    let response = match assets().iter().find(|(n, _)| *n == name) {
        Some((n, bytes)) => (
            [
                (header::CONTENT_TYPE, content_type(n)),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            *bytes,
        )
            .into_response(),
        None => not_found(name),
    };
    secure(response)
}

fn not_found(name: &str) -> Response {
    crate::error::ApiError::not_found("asset_not_found", format!("no dashboard file `{name}`"))
        .into_response()
}

/// `GET /`: the dashboard page.
pub async fn index() -> Response {
    file("index.html")
}

/// `GET /assets/{file}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    if name.contains('/') || name.contains("..") {
        return secure(not_found(&name));
    }
    file(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeds_the_page_and_types_files() {
        assert!(assets().iter().any(|(n, _)| *n == "index.html"));
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("style.css"), "text/css; charset=utf-8");
    }

    #[test]
    fn the_policy_forbids_framing_and_inline_code() {
        assert!(CSP.contains("frame-ancestors 'none'"));
        assert!(!CSP.contains("unsafe-inline") && !CSP.contains("unsafe-eval"));
        let r = file("index.html");
        assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
        assert_eq!(r.headers()[header::REFERRER_POLICY], "no-referrer");
    }
}
