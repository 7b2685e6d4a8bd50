//! Errors: [`ApiError`] is what a request gets back (status code plus
//! `{"error":{"code","message","hint"}}`), [`ServerError`] is why the server
//! could not start or stop cleanly.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
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
        }
    }
}
