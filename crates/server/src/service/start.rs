//! "Can this call start in time?", read from HTTP: the coordinator's
//! [`START_WITHIN_HEADER`] (milliseconds). The estimate and the refusal are
//! the application layer's ([`glassbox_app::service::start`]).

use std::time::Duration;

use axum::http::HeaderMap;
use glassbox_app::ServiceError;
use glassbox_models::EngineLoad;
pub use glassbox_nodes::cluster::START_WITHIN_HEADER;

/// Refuses the call when its header asks it to start sooner than the
/// engines' `loads` allow; no header (or an unreadable one): no deadline.
pub fn check(headers: &HeaderMap, loads: &[EngineLoad]) -> Result<(), ServiceError> {
    glassbox_app::service::start::check(within(headers), loads)
}

/// How soon the call must start, when its header says.
pub fn within(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(START_WITHIN_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
}
