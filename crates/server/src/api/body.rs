//! A JSON body extractor whose rejections are [`ApiError`]s (so a malformed
//! or oversized body gets the same error shape as everything else).

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Like `axum::Json`, with JSON errors.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(rejection) => Err(rejection_error(rejection)),
        }
    }
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
