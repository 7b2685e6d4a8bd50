//! Which priority band a request asks for, read from HTTP: the
//! `X-Glassbox-Priority` header (any API; it wins) over the runs API's
//! `priority` query parameter or a chat or embeddings body's `priority` /
//! `service_tier`. The rules are the application layer's
//! ([`glassbox_app::service::priority`]).

use axum::http::HeaderMap;
use glassbox_app::ServiceError;
pub use glassbox_app::service::priority::{HEADER, band};
use glassbox_trace::Priority;
use serde_json::Value;

/// The band the request asked for, if any (see
/// [`glassbox_app::service::priority::asked`]); a header that is not text
/// is refused like a band name that is no band.
pub fn asked(
    headers: &HeaderMap,
    field: Option<&Value>,
    service_tier: Option<&str>,
) -> Result<Option<Priority>, ServiceError> {
    let header = match headers.get(HEADER) {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| ServiceError::BadPriority {
            what: "header `X-Glassbox-Priority`".into(),
            reason: "not text".into(),
        })?),
    };
    glassbox_app::service::priority::asked(header, field, service_tier)
}
