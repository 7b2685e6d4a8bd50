//! `POST /v1/traces`: the OTLP/HTTP trace receiver, for pipelines Glassbox
//! does not run. Point an OpenTelemetry exporter at the server
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://host:8080/v1/traces`) and
//! its traces become requests of discovered topologies, with receipts and
//! explanations (`glassbox_ingest` does all of that; this module only
//! translates HTTP and hands the records to the trace writer).
//!
//! Bodies are `application/x-protobuf` or `application/json`, answered in
//! the same encoding. With `[store] durability = "commit"` (the default)
//! the answer waits until every trace the export completed has committed,
//! as a run's answer does; spans still waiting for their root span are
//! held in memory (`[ingest] hold_secs`) and acknowledged as held.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use glassbox_ingest::{Built, Encoding, IngestError, Receiver};
use glassbox_store::Durable;
use glassbox_trace::TraceSink;

use crate::error::{ApiError, ErrorBody};
use crate::service::durable::all_committed;
use crate::state::AppState;

/// The receiver shared by every export (an extension on the route).
pub type Shared = Arc<Receiver>;

fn refused(e: &IngestError) -> ApiError {
    let status = match e {
        IngestError::MediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        IngestError::Decode { .. } => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, e.code(), e.to_string())
}

/// Hands built traces to the writer; with `tickets`, one durability ticket
/// each (taken before the record is queued).
fn store(state: &AppState, built: Vec<Built>, tickets: bool) -> Vec<Option<Durable>> {
    let mut out = Vec::with_capacity(if tickets { built.len() } else { 0 });
    for b in built {
        if tickets {
            out.push(state.service.ticket(b.record.request_id));
        }
        for span in b.spans {
            state.writer.span(Arc::new(span));
        }
        state.writer.request(Arc::new(b.record));
    }
    out
}

/// `POST /v1/traces`: an OTLP trace export.
#[utoipa::path(
    post,
    path = "/v1/traces",
    tag = "traces",
    request_body(
        content = Object,
        content_type = "application/json",
        description = "An OTLP `ExportTraceServiceRequest` in OTLP/JSON; `application/x-protobuf` bodies (the SDKs' default) are accepted too. Spans in OpenInference or GenAI form become requests of discovered topologies (docs/ingest.md)."
    ),
    responses(
        (status = 200, description = "The traces the export completed are committed (the rest held for their root span): an `ExportTraceServiceResponse` in the request's encoding, with `partialSuccess` naming refused spans"),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 415, body = ErrorBody),
        (status = 503, body = ErrorBody),
    ),
    security(("api_key" = ["run"]))
)]
pub async fn export(
    State(state): State<AppState>,
    Extension(receiver): Extension<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    if let Some(enc) = headers.get(header::CONTENT_ENCODING)
        && enc.as_bytes() != b"identity"
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            format!(
                "`Content-Encoding: {}` is not accepted",
                String::from_utf8_lossy(enc.as_bytes())
            ),
        )
        .hint(
            "send uncompressed bodies (OTEL_EXPORTER_OTLP_COMPRESSION=none, the SDKs' default)",
        ));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let encoding = Encoding::from_content_type(content_type).map_err(|e| refused(&e))?;
    let request = glassbox_ingest::decode(encoding, &body).map_err(|e| refused(&e))?;
    let mut export = receiver.accept(request, glassbox_trace::unix_micros_now());
    let answer = export.response(encoding);
    let built = std::mem::take(&mut export.built);
    let tickets = store(&state, built, true);
    all_committed(tickets).await?;
    let mut response = (StatusCode::OK, answer).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    Ok(response)
}

/// The receiver for a server, and (on a runtime) a task that stores the
/// traces whose root never came, once they have waited `hold_secs`. The
/// task ends when the router holding the receiver is dropped.
pub fn receiver(state: &AppState) -> Shared {
    let shared = Arc::new(Receiver::new(&state.config.ingest));
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let weak: Weak<Receiver> = Arc::downgrade(&shared);
        let state = state.clone();
        rt.spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(rx) = weak.upgrade() else { return };
                let expired = rx.expire(glassbox_trace::unix_micros_now());
                if !expired.is_empty() {
                    store(&state, expired, false);
                }
            }
        });
    }
    shared
}
