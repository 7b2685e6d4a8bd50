//! `POST /v1/traces`: the OTLP/HTTP trace receiver, for pipelines Glassbox
//! does not run. Point an OpenTelemetry exporter at the server
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://host:8080/v1/traces`) and
//! its traces become requests of discovered topologies, with receipts and
//! explanations (`glassbox_ingest` does all of that; this module only
//! translates HTTP and hands the records to the trace writer).
//!
//! Bodies are `application/x-protobuf` or `application/json`, answered in
//! the same encoding, plain or `Content-Encoding: gzip`. With `[store] durability = "commit"` (the default)
//! the answer waits until every trace the export completed has committed,
//! as a run's answer does; spans still waiting for their root span are
//! held in memory (`[ingest] hold_secs`), written to the held-span log
//! (`glassbox_ingest::held`) before the answer, and retired from it once
//! their trace has committed: no acknowledged span is lost to a crash.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use glassbox_ingest::{Built, Encoding, IngestError, Receiver};
use glassbox_store::{Durable, StoreUrl};
use glassbox_trace::RequestId;

use crate::error::{ApiError, ErrorBody};
use crate::service::durable::all_committed;
use crate::state::AppState;

/// The receiver shared by every export (in the server's state).
pub type Shared = Arc<Receiver>;

fn refused(e: &IngestError) -> ApiError {
    let status = match e {
        IngestError::MediaType { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        IngestError::Decode { .. } => StatusCode::BAD_REQUEST,
        IngestError::HeldLog { .. } => StatusCode::SERVICE_UNAVAILABLE,
    };
    ApiError::new(status, e.code(), e.to_string())
}

/// Hands built traces to the writer, each with a durability ticket (taken
/// before the rows are handed over). The traces are encoded into rows here,
/// on the export's own thread, and go straight to the commit thread: the
/// answer waits for the commit anyway, concurrent exports so encode in
/// parallel, and no answer waits for the writer's encode thread
/// (docs/BENCHMARKS.md, "OTLP ingest"). A writer that is closing drops the
/// rows; their tickets then fail (`store_writer_closed`).
fn store(state: &AppState, built: Vec<Built>) -> Vec<Option<Durable>> {
    let mut tickets = Vec::with_capacity(built.len());
    let mut rows = Vec::with_capacity(built.len());
    for b in built {
        tickets.push(state.service.ticket(b.record.request_id));
        rows.push(state.writer.encode(&b.record, &b.spans));
    }
    let _ = state.writer.write_encoded(rows);
    tickets
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
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = inflated(&headers, body, state.config.ingest.max_body_bytes)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let encoding = Encoding::from_content_type(content_type).map_err(|e| refused(&e))?;
    let request = glassbox_ingest::decode(encoding, &body).map_err(|e| refused(&e))?;
    let receiver = &state.ingest;
    let mut export = receiver
        .accept(request, glassbox_trace::unix_micros_now())
        .map_err(|e| refused(&e))?;
    let answer = export.response(encoding);
    let built = std::mem::take(&mut export.built);
    let ids = trace_ids(&built);
    let tickets = store(&state, built);
    all_committed(tickets).await?;
    // Spans this export completed that earlier exports had held: retired
    // from the held-span log now that they are in the store. (With
    // `durability = "async"` nothing is awaited, and they are retired at
    // once, as promised by that setting.)
    receiver.committed(&ids).map_err(|e| refused(&e))?;
    let mut response = (StatusCode::OK, answer).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    Ok(response)
}

/// The body as sent, or inflated when it is `Content-Encoding: gzip` (the
/// Collector's `otlphttp` exporter gzips by default). What it inflates to
/// is held to the same `[ingest] max_body_bytes` as a plain body, so a
/// small body cannot unpack into an unbounded one.
fn inflated(headers: &HeaderMap, body: Bytes, max_bytes: usize) -> Result<Bytes, ApiError> {
    use std::io::Read;
    let Some(enc) = headers.get(header::CONTENT_ENCODING) else {
        return Ok(body);
    };
    let name = String::from_utf8_lossy(enc.as_bytes())
        .trim()
        .to_ascii_lowercase();
    match name.as_str() {
        "" | "identity" => Ok(body),
        "gzip" | "x-gzip" => {
            let limit = u64::try_from(max_bytes).unwrap_or(u64::MAX);
            let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(max_bytes));
            flate2::read::GzDecoder::new(&body[..])
                .take(limit.saturating_add(1))
                .read_to_end(&mut out)
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "bad_gzip",
                        format!("the `Content-Encoding: gzip` body could not be inflated: {e}"),
                    )
                })?;
            if out.len() > max_bytes {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!(
                        "the gzip body inflates to more than `[ingest] max_body_bytes` ({max_bytes} bytes)"
                    ),
                )
                .hint("export smaller batches, or raise `[ingest] max_body_bytes`"));
            }
            Ok(Bytes::from(out))
        }
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_encoding",
            format!("`Content-Encoding: {name}` is not accepted"),
        )
        .hint("send gzip or uncompressed bodies (OTEL_EXPORTER_OTLP_COMPRESSION=gzip or none)")),
    }
}

fn trace_ids(built: &[Built]) -> Vec<u128> {
    built.iter().map(|b| b.record.request_id.0).collect()
}

/// Where held spans are logged when `[ingest] held_dir` is unset: beside a
/// SQLite store, else in the user's data directory.
pub fn default_held_dir(store: &StoreUrl) -> Option<PathBuf> {
    match store {
        StoreUrl::Sqlite(path) => {
            let mut name = path.file_name()?.to_os_string();
            name.push(".ingest-held");
            Some(path.with_file_name(name))
        }
        StoreUrl::Postgres(_) => glassbox_store::default_sqlite_path()
            .ok()
            .and_then(|p| Some(p.parent()?.join("ingest-held"))),
    }
}

/// The server's receiver, with its held-span log opened and replayed:
/// spans an earlier process acknowledged and held are held again (except
/// traces already in the store); traces the replay completes come back to
/// be stored ([`store_replayed`]). When another process on this machine
/// has the log open (a second server or a `glassbox worker` on the same
/// store), this one holds spans in memory only, and says so in `notes`.
pub async fn open_receiver(
    config: &crate::Config,
    readers: &Arc<crate::state::ReadPool>,
    notes: &mut Vec<String>,
) -> Result<(Shared, Vec<Built>), crate::error::ServerError> {
    let settings = config.ingest.clone();
    let Some(dir) = settings.held_dir.clone() else {
        return Ok((Arc::new(Receiver::new(&settings)), Vec::new()));
    };
    let readers = readers.clone();
    let opened = tokio::task::spawn_blocking(move || {
        let mut stored = |id: u128| readers.with(|s| matches!(s.get(RequestId(id)), Ok(Some(_))));
        Receiver::with_log(&settings, &dir, &mut stored)
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    match opened {
        Ok((receiver, built)) => Ok((Arc::new(receiver), built)),
        Err(e) if e.log_in_use() => {
            notes.push(format!(
                "{e}; OTLP spans waiting for their root span are kept in memory only by this process"
            ));
            Ok((Arc::new(Receiver::new(&config.ingest)), Vec::new()))
        }
        Err(e) => Err(std::io::Error::other(e.to_string()).into()),
    }
}

/// Stores traces that were held and are now built (replayed at start, or
/// waited too long for their root), and retires their spans from the
/// held-span log once they have committed.
fn store_held(state: &AppState, receiver: &Shared, built: Vec<Built>) {
    if built.is_empty() {
        return;
    }
    let ids = trace_ids(&built);
    let tickets = store(state, built);
    let receiver = receiver.clone();
    let retire = async move {
        if all_committed(tickets).await.is_ok() {
            let _ = receiver.committed(&ids);
        }
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(retire);
        }
        // No runtime (never in the server): left in the log, replayed
        // and found stored at the next start.
        Err(_) => drop(retire),
    }
}

/// Stores what the held-span log's replay built (at start).
pub fn store_replayed(state: &AppState, built: Vec<Built>) {
    store_held(state, &state.ingest, built);
}

/// Stores the traces whose root never came, once they have waited
/// `hold_secs`, every second until `stop`.
pub async fn expire_periodically(state: AppState, stop: glassbox_engine::CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        let expired = state.ingest.expire(glassbox_trace::unix_micros_now());
        store_held(&state, &state.ingest, expired);
    }
}
