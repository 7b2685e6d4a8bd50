//! `Path` and `Query` extractors whose rejections are [`ApiError`]s, so that
//! `/v1/traces/%ff%fe` or `?limit=-1` get the same JSON error shape as
//! everything else instead of axum's plain-text rejection.

use axum::extract::FromRequestParts;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Like `axum::extract::Path`, with JSON errors.
#[derive(Debug, Clone)]
pub struct Path<T>(pub T);

/// Like `axum::extract::Query`, with JSON errors.
#[derive(Debug, Clone)]
pub struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(r) => Err(path_error(r)),
        }
    }
}

impl<S, T> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(r) => Err(query_error(r)),
        }
    }
}

fn path_error(r: PathRejection) -> ApiError {
    let status = r.status();
    let text = r.body_text();
    if status.is_server_error() {
        return ApiError::new(status, "bad_route", text);
    }
    ApiError::new(status, "bad_path", text)
        .hint("path segments must be percent-encoded UTF-8 of the expected type")
}

fn query_error(r: QueryRejection) -> ApiError {
    ApiError::new(r.status(), "bad_query", r.body_text())
        .hint("docs/openapi.json lists each endpoint's query parameters and their types")
}

/// The request key a request carries in its `X-Glassbox-Key` header, if
/// any, as text (the version line-up reads it, see
/// [`RequestKey::find`](glassbox_app::versions::RequestKey::find)).
pub fn key_header(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(glassbox_app::versions::KEY_HEADER)
        .and_then(|v| v.to_str().ok())
}
