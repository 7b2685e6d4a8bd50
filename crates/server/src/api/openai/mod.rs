//! OpenAI-compatible endpoints: `POST /v1/chat/completions` ([`chat`],
//! streamed by [`stream`]), `POST /v1/embeddings` ([`embeddings`](mod@embeddings)),
//! `GET /v1/models` ([`models`](mod@models)). Topologies are the models.
//!
//! Chat: `model` is a topology id; the last `user` message becomes the input
//! `{"question": TEXT}`; `max_tokens` (or `max_completion_tokens`) lowers
//! every LLM call's own `max_tokens`; the sampling fields (temperature,
//! ...) are checked against OpenAI's ranges and then ignored, because the
//! topology decides them. `usage`
//! counts the tokens of the topology's LLM spans.
//!
//! Streaming (`stream: true`) sends `chat.completion.chunk` events. Tokens go
//! out as the LLM generates them *only* when no `output_guard` runs after an
//! LLM: guarded text must not leave before the guard has seen it, so such
//! topologies (and topologies without an LLM) stream the final, guarded
//! output as one piece when the request ends. `GET /v1/topologies` shows the
//! mode of each (`streaming: live | buffered`).
//!
//! Tools and structured answers (`tools`, `tool_choice`,
//! `response_format`) go to the topology's LLM nodes; see [`tools`].
//!
//! Embeddings: `model` is a topology whose entry nodes are `embedding`
//! nodes; each input string is one request (`{"question": TEXT}`) and the
//! topology's output must carry `vector`.
//!
//! Rate limits count work: an embeddings call is charged one unit per input
//! (at most `max_embedding_inputs` of them), and with `tokens_per_minute`
//! chats and embeddings are charged their estimated tokens before they run
//! and the difference to the real usage after ([`crate::auth`]).
//!
//! These handlers only translate between the OpenAI API and the request
//! service ([`crate::service`]), which admits, runs, streams, counts and
//! hands off traces for every API alike.

pub mod chat;
pub mod embeddings;
pub mod models;
pub mod stream;
pub mod tools;
pub mod usage;

pub use chat::chat_completions;
pub use embeddings::embeddings;
pub use models::models;

use glassbox_engine::{ExecError, Outcome, text_of};
use serde_json::Value;

use crate::error::{ApiError, failure_status};

/// 404 `topology_not_found` as OpenAI names it: `model_not_found`, with
/// what kind of topology `model` must name.
fn model_error(e: glassbox_app::ServiceError, what: &str) -> ApiError {
    let e = ApiError::from(e);
    if e.code == "topology_not_found" {
        ApiError {
            code: "model_not_found",
            message: format!("{} (`model` names a topology {what})", e.message),
            ..e
        }
    } else {
        e
    }
}

/// The text of a topology's output, as an assistant message.
fn answer_text(output: &Value) -> String {
    match text_of(output) {
        Some(t) => t.to_string(),
        None if output.is_null() => String::new(),
        None => output.to_string(),
    }
}

fn now_secs() -> u64 {
    glassbox_trace::unix_micros_now() / 1_000_000
}

/// The error answer of a finished request that failed: its maximum run
/// time's 504 when that ended it, else [`run_failed`].
fn finished_failed(finished: &crate::service::Finished, err: &ExecError) -> ApiError {
    finished
        .over_run_time()
        .map(ApiError::from)
        .unwrap_or_else(|| run_failed(&finished.outcome, err))
}

/// The error answer of a failed run, naming its trace.
fn run_failed(outcome: &Outcome, err: &ExecError) -> ApiError {
    let (status, hint) = failure_status(err);
    let e = ApiError::new(
        status,
        err.code(),
        format!(
            "{err} (request {}: GET /v1/traces/{} shows its path)",
            outcome.trace.record.request_id, outcome.trace.record.request_id
        ),
    );
    let e = if status == axum::http::StatusCode::TOO_MANY_REQUESTS {
        e.retry_after(1)
    } else {
        e
    };
    match hint {
        Some(h) => e.hint(h),
        None => e,
    }
}
