//! Errors: [`ApiError`] is what a request gets back (status code plus
//! `{"error":{"code","message","hint"}}`), [`ServerError`] is why the server
//! could not start or stop cleanly. [`json_errors`] makes sure every error
//! response is JSON, including those no handler wrote (unknown methods, a
//! layer's bare status).
//!
//! It is also the one place where domain failures become statuses: the
//! request service's refusals (`From<ServiceError>`), a failed run
//! ([`failure_status`]), the store's errors (`From<StoreError>`).

use axum::Json;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use glassbox_app::ServiceError;
use glassbox_app::models::door::CallError;
use glassbox_engine::{ExecError, NodeError};
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong, for machines (`code`) and people (`message`, `hint`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine code, e.g. `topology_not_found`, `rate_limited`.
    pub code: String,
    pub message: String,
    /// What to do about it, where there is something to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// An error answered to a request.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} [{code}]")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    /// Seconds, for 429 and 503 answers (`Retry-After`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            hint: None,
            retry_after: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hint = Some(hint.into());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> ApiError {
        self.retry_after = Some(secs.max(1));
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn internal(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message.clone(),
                hint: self.hint.clone(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

/// The longest non-JSON error body kept as the message.
const MAX_PLAIN_ERROR: usize = 4096;

/// Middleware, outermost: an error response that is not JSON becomes an
/// [`ApiError`] with the same status and headers, its text as the message.
/// Handlers already answer JSON; this catches what they never see (a 405
/// from the router, a rejection from an extractor added later).
pub async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let response = next.run(req).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_PLAIN_ERROR)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let error = if status == StatusCode::METHOD_NOT_ALLOWED {
        let allowed = parts
            .headers
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        ApiError::new(
            status,
            "method_not_allowed",
            format!("`{method}` is not allowed on `{path}`"),
        )
        .hint(format!("allowed: {allowed}"))
    } else {
        let message = if text.is_empty() {
            status
                .canonical_reason()
                .unwrap_or("error")
                .to_ascii_lowercase()
        } else {
            text
        };
        ApiError::new(status, code_for(status), message)
    };
    let mut out = error.into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().append(name.clone(), value.clone());
        }
    }
    out
}

/// A machine code for an error status nobody named.
fn code_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        408 => "request_timeout",
        413 => "body_too_large",
        415 => "unsupported_media_type",
        422 => "invalid_body",
        429 => "too_many_requests",
        431 => "headers_too_large",
        503 => "unavailable",
        504 => "timeout",
        500..=599 => "internal",
        _ => "http_error",
    }
}

impl From<glassbox_store::StoreError> for ApiError {
    fn from(err: glassbox_store::StoreError) -> ApiError {
        use glassbox_store::StoreError;
        let status = match &err {
            StoreError::BadUrl { .. }
            | StoreError::BadPattern { .. }
            | StoreError::BadRedactRule { .. } => StatusCode::BAD_REQUEST,
            StoreError::Open { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, err.code(), err.to_string())
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> ApiError {
        let status = match &err {
            ServiceError::NotServed { .. } => StatusCode::NOT_FOUND,
            ServiceError::BadPriority { .. } => StatusCode::BAD_REQUEST,
            ServiceError::Overloaded { .. }
            | ServiceError::Shed { .. }
            | ServiceError::RateLimited { .. }
            | ServiceError::TooLargeForRateLimit { .. }
            | ServiceError::CannotStartInTime { .. } => StatusCode::TOO_MANY_REQUESTS,
            ServiceError::TraceNotStored { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ServiceError::MaxRunTimeExceeded { .. } => StatusCode::GATEWAY_TIMEOUT,
        };
        let mut api = ApiError::new(status, err.code(), err.to_string());
        api.hint = err.hint();
        if let Some(secs) = err.retry_after() {
            api = api.retry_after(secs);
        }
        api
    }
}

impl From<CallError> for ApiError {
    /// A worker's model call: an unknown model is OpenAI's 404
    /// `model_not_found` naming what is served; a refusal is the request
    /// service's 429; an engine failure a 500 the coordinator fails over.
    fn from(err: CallError) -> ApiError {
        let message = err.to_string();
        match err {
            CallError::Refused(e) => ApiError::from(e),
            CallError::Unknown(_) => ApiError::not_found("model_not_found", message)
                .hint("GET /v1/models lists the models this worker serves"),
            CallError::WrongKind { .. } => ApiError::bad_request("wrong_model_kind", message),
            CallError::BadInput(_) => ApiError::bad_request("bad_input", message),
            CallError::Overloaded(_) => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "overloaded", message).retry_after(1)
            }
            CallError::Failed { .. } => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "model_failed", message)
            }
        }
    }
}

/// Why the server could not start, or could not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot read the config file `{path}`: {source}")]
    ConfigIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the config file `{path}` is not valid: {message}")]
    Config { path: String, message: String },
    #[error("the topologies directory `{path}` cannot be read: {source}")]
    TopologiesDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the trace store failed: {0}")]
    Store(#[from] glassbox_store::StoreError),
    #[error("the server stopped with an I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A worker's models did not all load (one line per model).
    #[error("cannot serve every model:\n{0}")]
    Models(#[from] glassbox_app::models::door::LoadError),
}

impl From<glassbox_app::catalog::DirError> for ServerError {
    fn from(e: glassbox_app::catalog::DirError) -> ServerError {
        ServerError::TopologiesDir {
            path: e.path,
            source: e.source,
        }
    }
}

impl ServerError {
    /// Stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            ServerError::ConfigIo { .. } | ServerError::Config { .. } => "bad_config",
            ServerError::TopologiesDir { .. } => "bad_topologies_dir",
            ServerError::Bind { .. } => "bind_failed",
            ServerError::Store(e) => e.code(),
            ServerError::Io(_) => "io",
            ServerError::Models(_) => "model_not_loaded",
        }
    }
}

/// The HTTP status of a failed run, and a hint: the one place an engine
/// failure becomes a status, for every door (runs, chat, embeddings).
pub fn failure_status(err: &ExecError) -> (StatusCode, Option<&'static str>) {
    fn root(err: &ExecError) -> &ExecError {
        match err {
            ExecError::FallbackFailed { cause, .. } => root(cause),
            other => other,
        }
    }
    match root(err) {
        ExecError::NodeFailed {
            source: NodeError::BadInput(_),
            ..
        } => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("check the input fields this topology reads"),
        ),
        ExecError::NodeFailed {
            source: NodeError::Overloaded(_),
            ..
        } => (
            StatusCode::TOO_MANY_REQUESTS,
            Some(
                "a model this topology uses is at capacity: retry after the seconds in `Retry-After`, or raise its `max_num_seqs` / queue",
            ),
        ),
        ExecError::NodeFailed {
            source:
                NodeError::Unavailable(_)
                | NodeError::Upstream {
                    retryable: true, ..
                },
            ..
        } => (StatusCode::SERVICE_UNAVAILABLE, None),
        ExecError::NodeTimeout { .. } | ExecError::DeadlineExceeded { .. } => {
            (StatusCode::GATEWAY_TIMEOUT, None)
        }
        ExecError::Cancelled => (StatusCode::SERVICE_UNAVAILABLE, None),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(source: NodeError) -> ExecError {
        ExecError::NodeFailed {
            node: "llm".into(),
            attempt: 1,
            source,
        }
    }

    #[test]
    fn each_service_refusal_has_its_status_and_retry_after() {
        let not_served = ApiError::from(ServiceError::NotServed {
            id: "rga".into(),
            closest: Some("rag".into()),
            served: vec!["rag".into()],
        });
        assert_eq!(not_served.status, StatusCode::NOT_FOUND);
        assert_eq!(not_served.code, "topology_not_found");
        assert!(not_served.hint.is_some_and(|h| h.contains("`rag`")));
        assert_eq!(not_served.retry_after, None);
        let shed = ApiError::from(ServiceError::Shed {
            topology: "rag".into(),
            band: glassbox_trace::Priority::Offline,
            by: glassbox_trace::Priority::Interactive,
            queue: 4,
        });
        assert_eq!(shed.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(shed.retry_after, Some(1));
        let late = ApiError::from(ServiceError::CannotStartInTime {
            within: std::time::Duration::from_millis(10),
            waiting: 3,
            wait: std::time::Duration::from_millis(200),
        });
        assert_eq!(late.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(late.retry_after, Some(1), "never less than a second");
        let bad = ApiError::from(ServiceError::BadPriority {
            what: "`priority`".into(),
            reason: "no".into(),
        });
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn overload_is_429_and_unavailable_503() {
        let (status, hint) = failure_status(&failed(NodeError::Overloaded("full".into())));
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(hint.is_some_and(|h| h.contains("Retry-After")));
        let (status, _) = failure_status(&failed(NodeError::Unavailable("down".into())));
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        let (status, _) = failure_status(&failed(NodeError::BadInput("no".into())));
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    }
}
