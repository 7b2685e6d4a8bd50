//! What a coordinator tells a worker besides the OpenAI-compatible body:
//! its key, and headers a Glassbox worker reads (others ignore them).

/// The environment variable whose value a coordinator sends to workers as
/// their API key (`Authorization: Bearer`): one of the keys the workers
/// accept (their `GLASSBOX_API_KEY` or a key in their config).
pub const WORKER_KEY_ENV: &str = glassbox_cluster::etcd::trust::WORKER_KEY_ENV;

/// The header a coordinator tells a worker in how many milliseconds a
/// call must start (what is left of its node's timeout and of the
/// request's deadline); a Glassbox worker that cannot answers 429 at once
/// (`glassbox_app::service::start`).
pub const START_WITHIN_HEADER: &str = "x-glassbox-start-within-ms";

/// The header that tells a Glassbox worker, as `false`, that nobody reads
/// a streamed call's text as it comes (it streams only so that a slow
/// worker is heard to be alive): the worker then evaluates new prompts in
/// as few steps as it can instead of chunking them to keep this call's
/// pace (`prefill_chunk`). The coordinator does not send it yet (see
/// `Remote::chat`).
pub const WATCHED_HEADER: &str = "x-glassbox-watched";
