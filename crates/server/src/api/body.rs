//! A JSON body extractor whose rejections are [`ApiError`]s (so a malformed,
//! oversized or too slowly sent body gets the same error shape as everything
//! else).

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::connection::BodyTimeout;
use crate::error::ApiError;

/// Like `axum::Json`, with JSON errors.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(rejection) => match body_timeout(&rejection) {
                // The rest of the body may still be on its way; the
                // connection layer closes after any answer to an unread body.
                Some(t) => Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", t.to_string())
                    .hint("send the body faster, or raise `connections.body_timeout_ms` in the server config")
                    .into_response()),
                None => Err(rejection_error(rejection).into_response()),
            },
        }
    }
}

/// The body deadline, if that is why reading the body failed.
fn body_timeout(r: &JsonRejection) -> Option<BodyTimeout> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(r);
    while let Some(e) = source {
        if let Some(t) = e.downcast_ref::<BodyTimeout>() {
            return Some(*t);
        }
        source = e.source();
    }
    None
}

fn rejection_error(r: JsonRejection) -> ApiError {
    let status = r.status();
    let text = r.body_text();
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(status, "body_too_large", text)
            .hint("send a smaller body, or raise `body_limit_bytes` in the server config"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(status, "unsupported_media_type", text)
            .hint("send `Content-Type: application/json`"),
        StatusCode::UNPROCESSABLE_ENTITY => ApiError::new(status, "invalid_body", text),
        _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", text),
    }
}
