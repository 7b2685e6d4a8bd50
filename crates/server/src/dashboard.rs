//! The web dashboard: static files from `crates/server/assets/`, embedded at
//! compile time (see `build.rs`), served at `/` and `/assets/{file}`. They
//! are public; the dashboard's JavaScript calls the API with a key the user
//! enters (kept in the browser's localStorage) when the server needs one.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

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
    match assets().iter().find(|(n, _)| *n == name) {
        Some((n, bytes)) => (
            [
                (header::CONTENT_TYPE, content_type(n)),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *bytes,
        )
            .into_response(),
        None => crate::error::ApiError::not_found(
            "asset_not_found",
            format!("no dashboard file `{name}`"),
        )
        .into_response(),
    }
}

/// `GET /`: the dashboard page.
pub async fn index() -> Response {
    file("index.html")
}

/// `GET /assets/{file}`.
pub async fn asset(Path(name): Path<String>) -> Response {
    if name.contains('/') || name.contains("..") {
        return StatusCode::NOT_FOUND.into_response();
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
}
