//! The `/v1` JSON API, one module per resource.

pub mod alerts;
pub mod body;
pub mod cluster;
pub mod compare;
pub mod discovered;
pub mod extract;
pub mod gpus;
pub mod openai;
pub mod otlp;
pub mod reports;
pub mod runs;
pub mod system;
pub mod topologies;
pub mod traces;
pub mod versions;

use axum::http::HeaderValue;
use axum::response::Response;

/// The header carrying the request (trace) id on run and completion answers.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Sets `x-request-id`.
pub fn request_id_header(response: &mut Response, id: &str) {
    if let Ok(v) = HeaderValue::from_str(id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
}
