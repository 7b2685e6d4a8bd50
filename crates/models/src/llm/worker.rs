//! The queue in front of a model: a cloneable handle, a bounded job channel,
//! one worker thread running the admitted requests as one batch
//! ([`Batch`](super::batch::Batch)), and a oneshot reply per request.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::batch::{Batch, Job};
use super::load::{dims, load_model};
use super::pool::Pool;
use super::session::Session;
use super::stats::{EngineLoad, Load};
use super::stream::CompletionStream;
use super::{ChatMessage, Completion, GenerateRequest, LlmError, LlmOptions, ModelDims, validate};
use crate::hash::version_tag;

/// Facts about a loaded model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub path: PathBuf,
    /// File name and the first 12 hex digits of its SHA-256.
    pub version: String,
    /// The context window, in tokens.
    pub n_ctx: u32,
    pub threads: usize,
    /// The most requests generating at once.
    pub max_num_seqs: u32,
    /// KV-cache cells shared by the running requests.
    pub kv_cells: u32,
    /// The chat template from the GGUF metadata (`chatml` when it has none).
    pub chat_template: Option<String>,
    /// Parameters, bytes and shape of the model.
    pub dims: ModelDims,
}

/// A handle to a local model running on its own thread. Cheap to clone; the
/// worker stops when the last handle is dropped (after the request in hand).
///
/// Async callers use [`generate`](Self::generate) / [`stream`](Self::stream);
/// blocking callers (not on a tokio runtime thread) the `*_blocking` methods.
#[derive(Clone)]
pub struct LlmHandle {
    inner: Arc<Inner>,
}

struct Inner {
    jobs: SyncSender<Job>,
    info: ModelInfo,
    capacity: usize,
    load: Arc<Load>,
}

impl std::fmt::Debug for LlmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmHandle")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

impl LlmHandle {
    /// Loads the model and starts its worker thread. Blocks while the model is
    /// loaded and its SHA-256 computed (first time only; it is cached next to
    /// the file), so async callers should run it in `spawn_blocking`.
    pub fn load(options: LlmOptions) -> Result<Self, LlmError> {
        let version = version_tag(&options.model_path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                LlmError::ModelMissing {
                    path: options.model_path.clone(),
                }
            } else {
                LlmError::Io {
                    path: options.model_path.clone(),
                    source,
                }
            }
        })?;
        let capacity = options.queue_capacity.max(1);
        let (jobs, queue) = std::sync::mpsc::sync_channel(capacity);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_options = options.clone();
        let load = Arc::new(Load::default());
        let worker_load = Arc::clone(&load);
        std::thread::Builder::new()
            .name("glassbox-llm".to_owned())
            .spawn(move || worker(thread_options, version, queue, ready_tx, worker_load))
            .map_err(|e| LlmError::Backend(format!("spawning the model thread: {e}")))?;
        let info = ready_rx.recv().map_err(|_| LlmError::WorkerGone)??;
        Ok(Self {
            inner: Arc::new(Inner {
                jobs,
                info,
                capacity,
                load,
            }),
        })
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.inner.info
    }

    /// Requests running and waiting, and KV cells in use, right now.
    pub fn engine_load(&self) -> EngineLoad {
        let load = &self.inner.load;
        EngineLoad {
            running: load.running.load(Ordering::Relaxed),
            waiting: load.waiting.load(Ordering::Relaxed),
            kv_reserved: load.kv_reserved.load(Ordering::Relaxed),
            kv_cells: self.inner.info.kv_cells as usize,
            prefix_queries: load.prefix_queries.load(Ordering::Relaxed),
            prefix_hits: load.prefix_hits.load(Ordering::Relaxed),
            prefix_host_hits: load.prefix_host_hits.load(Ordering::Relaxed),
            host_cache_bytes: load.host_cache_bytes.load(Ordering::Relaxed),
            chunk_placed_tokens: load.chunk_placed_tokens.load(Ordering::Relaxed),
            chunk_cache_bytes: load.chunk_cache_bytes.load(Ordering::Relaxed),
            spec_drafts: load.spec_drafts.load(Ordering::Relaxed),
            spec_draft_tokens: load.spec_draft_tokens.load(Ordering::Relaxed),
            spec_accepted_tokens: load.spec_accepted_tokens.load(Ordering::Relaxed),
            preemptions: load.preemptions.load(Ordering::Relaxed),
            generation_tokens: load.generation_tokens.load(Ordering::Relaxed),
            latency: load.latencies.snapshot(),
        }
    }

    /// The model's version tag (file name and hash prefix).
    pub fn version(&self) -> &str {
        &self.inner.info.version
    }

    fn submit(&self, job: Job) -> Result<(), LlmError> {
        self.inner.jobs.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => LlmError::QueueFull {
                capacity: self.inner.capacity,
            },
            TrySendError::Disconnected(_) => LlmError::WorkerGone,
        })
    }

    fn start(
        &self,
        request: GenerateRequest,
        tokens: Option<mpsc::UnboundedSender<String>>,
        watched: bool,
    ) -> Result<oneshot::Receiver<Result<Completion, LlmError>>, LlmError> {
        validate(&request)?;
        let (reply, done) = oneshot::channel();
        self.submit(Job::Generate {
            request,
            arrived: Instant::now(),
            tokens,
            watched,
            reply,
        })?;
        Ok(done)
    }

    /// Generates a completion. Dropping the future cancels the request (at the
    /// next token, or before it starts if it is still queued).
    pub async fn generate(&self, request: GenerateRequest) -> Result<Completion, LlmError> {
        let done = self.start(request, None, false)?;
        done.await.map_err(|_| LlmError::WorkerGone)?
    }

    /// Blocking [`generate`](Self::generate); not on an async runtime thread.
    pub fn generate_blocking(&self, request: GenerateRequest) -> Result<Completion, LlmError> {
        let done = self.start(request, None, false)?;
        done.blocking_recv().map_err(|_| LlmError::WorkerGone)?
    }

    /// Generates a completion as a stream of text pieces. Dropping the stream
    /// cancels generation.
    pub fn stream(&self, request: GenerateRequest) -> Result<CompletionStream, LlmError> {
        self.stream_paced(request, true)
    }

    /// [`stream`](Self::stream) for pieces relayed to a caller that reads
    /// the answer whole (a coordinator that streams only to see that the
    /// worker is alive): the engine takes whole prompts into a step for
    /// it, as for [`generate`](Self::generate), rather than chunking them
    /// to keep its pace (`LlmOptions::prefill_chunk`).
    pub fn stream_unwatched(&self, request: GenerateRequest) -> Result<CompletionStream, LlmError> {
        self.stream_paced(request, false)
    }

    fn stream_paced(
        &self,
        request: GenerateRequest,
        watched: bool,
    ) -> Result<CompletionStream, LlmError> {
        let (tx, tokens) = mpsc::unbounded_channel();
        let done = self.start(request, Some(tx), watched)?;
        Ok(CompletionStream { tokens, done })
    }

    /// The prompt a chat renders to with the model's template.
    pub fn render_prompt_blocking(&self, messages: Vec<ChatMessage>) -> Result<String, LlmError> {
        let (reply, rx) = oneshot::channel();
        self.submit(Job::Render { messages, reply })?;
        rx.blocking_recv().map_err(|_| LlmError::WorkerGone)?
    }

    /// The model's tokens for `text` (special tokens parsed; BOS added when
    /// `add_special` and the model wants one).
    pub fn tokenize_blocking(&self, text: &str, add_special: bool) -> Result<Vec<u32>, LlmError> {
        let (reply, rx) = oneshot::channel();
        self.submit(Job::Tokenize {
            text: text.to_owned(),
            add_special,
            reply,
        })?;
        rx.blocking_recv().map_err(|_| LlmError::WorkerGone)
    }

    /// The text of `tokens`.
    pub fn detokenize_blocking(&self, tokens: &[u32]) -> Result<String, LlmError> {
        let (reply, rx) = oneshot::channel();
        self.submit(Job::Detokenize {
            tokens: tokens.to_vec(),
            reply,
        })?;
        rx.blocking_recv().map_err(|_| LlmError::WorkerGone)
    }
}

/// The worker thread: loads the model, reports readiness, then runs the
/// batch until every handle is gone and the last request has finished.
fn worker(
    options: LlmOptions,
    version: String,
    queue: Receiver<Job>,
    ready: std::sync::mpsc::Sender<Result<ModelInfo, LlmError>>,
    load: Arc<Load>,
) {
    let model = match load_model(&options) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let session = match Session::new(&model, &options, version.clone()) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let kv_cells = session.kv_cells();
    let info = ModelInfo {
        path: options.model_path.clone(),
        version,
        n_ctx: session.n_ctx(),
        threads: options.thread_count(),
        max_num_seqs: options.seqs(),
        kv_cells,
        chat_template: session.template_source(),
        dims: dims(&model),
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    let max_seqs = options.seqs() as usize;
    let pool = Pool {
        pooled: options.pooled(),
        cells: kv_cells as usize,
        n_batch: options.n_batch.max(1) as usize,
    };
    let mut batch = Batch::new(session, load, pool, max_seqs, kv_cells as usize);
    while batch.turn(&queue) {}
    batch.publish();
}
