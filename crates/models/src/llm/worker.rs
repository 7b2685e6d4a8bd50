//! The queue in front of a model: a cloneable handle, a bounded job channel,
//! one worker thread, and a oneshot reply per request.

use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use tokio::sync::{mpsc, oneshot};

use super::session::{Session, load_model};
use super::{ChatMessage, Completion, GenerateRequest, LlmError, LlmOptions, validate};
use crate::hash::version_tag;

/// Text pieces a stream can hold before the worker waits for the reader.
const STREAM_BUFFER: usize = 256;

/// What the worker can be asked to do.
enum Job {
    Generate {
        request: GenerateRequest,
        tokens: Option<mpsc::Sender<String>>,
        reply: oneshot::Sender<Result<Completion, LlmError>>,
    },
    Render {
        messages: Vec<ChatMessage>,
        reply: oneshot::Sender<Result<String, LlmError>>,
    },
    Tokenize {
        text: String,
        add_special: bool,
        reply: oneshot::Sender<Vec<u32>>,
    },
    Detokenize {
        tokens: Vec<u32>,
        reply: oneshot::Sender<String>,
    },
}

/// Facts about a loaded model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub path: PathBuf,
    /// File name and the first 12 hex digits of its SHA-256.
    pub version: String,
    /// The context window, in tokens.
    pub n_ctx: u32,
    pub threads: usize,
    /// The chat template from the GGUF metadata (`chatml` when it has none).
    pub chat_template: Option<String>,
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
}

impl std::fmt::Debug for LlmHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmHandle")
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

/// A completion arriving piece by piece.
#[derive(Debug)]
pub struct CompletionStream {
    tokens: mpsc::Receiver<String>,
    done: oneshot::Receiver<Result<Completion, LlmError>>,
}

impl CompletionStream {
    /// The next piece of text, or `None` when generation has ended.
    pub async fn next(&mut self) -> Option<String> {
        self.tokens.recv().await
    }

    /// The final completion (text, usage, finish reason). Pieces not read are
    /// skipped, not lost: they are part of [`Completion::text`].
    pub async fn finish(self) -> Result<Completion, LlmError> {
        let Self { mut tokens, done } = self;
        // Drain rather than drop: dropping the receiver would cancel generation,
        // and not reading would stall the worker once the buffer is full.
        while tokens.recv().await.is_some() {}
        done.await.map_err(|_| LlmError::WorkerGone)?
    }

    /// Blocking [`next`](Self::next); not on an async runtime thread.
    pub fn next_blocking(&mut self) -> Option<String> {
        self.tokens.blocking_recv()
    }

    /// Blocking [`finish`](Self::finish); not on an async runtime thread.
    pub fn finish_blocking(self) -> Result<Completion, LlmError> {
        let Self { mut tokens, done } = self;
        while tokens.blocking_recv().is_some() {}
        done.blocking_recv().map_err(|_| LlmError::WorkerGone)?
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
        std::thread::Builder::new()
            .name("glassbox-llm".to_owned())
            .spawn(move || worker(thread_options, version, queue, ready_tx))
            .map_err(|e| LlmError::Backend(format!("spawning the model thread: {e}")))?;
        let info = ready_rx.recv().map_err(|_| LlmError::WorkerGone)??;
        Ok(Self {
            inner: Arc::new(Inner {
                jobs,
                info,
                capacity,
            }),
        })
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.inner.info
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
        tokens: Option<mpsc::Sender<String>>,
    ) -> Result<oneshot::Receiver<Result<Completion, LlmError>>, LlmError> {
        validate(&request)?;
        let (reply, done) = oneshot::channel();
        self.submit(Job::Generate {
            request,
            tokens,
            reply,
        })?;
        Ok(done)
    }

    /// Generates a completion. Dropping the future cancels the request (at the
    /// next token, or before it starts if it is still queued).
    pub async fn generate(&self, request: GenerateRequest) -> Result<Completion, LlmError> {
        let done = self.start(request, None)?;
        done.await.map_err(|_| LlmError::WorkerGone)?
    }

    /// Blocking [`generate`](Self::generate); not on an async runtime thread.
    pub fn generate_blocking(&self, request: GenerateRequest) -> Result<Completion, LlmError> {
        let done = self.start(request, None)?;
        done.blocking_recv().map_err(|_| LlmError::WorkerGone)?
    }

    /// Generates a completion as a stream of text pieces. Dropping the stream
    /// cancels generation.
    pub fn stream(&self, request: GenerateRequest) -> Result<CompletionStream, LlmError> {
        let (tx, tokens) = mpsc::channel(STREAM_BUFFER);
        let done = self.start(request, Some(tx))?;
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

/// The worker thread: loads the model, reports readiness, serves jobs until
/// every handle is gone.
fn worker(
    options: LlmOptions,
    version: String,
    queue: Receiver<Job>,
    ready: std::sync::mpsc::Sender<Result<ModelInfo, LlmError>>,
) {
    let model = match load_model(&options) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let mut session = match Session::new(&model, &options, version.clone()) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let info = ModelInfo {
        path: options.model_path.clone(),
        version,
        n_ctx: session.n_ctx(),
        threads: options.thread_count(),
        chat_template: session.template_source(),
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    while let Ok(job) = queue.recv() {
        // A panic inside llama.cpp's bindings must not take every later request
        // down with it; the context is reset at the start of each request.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| run_job(&mut session, job)));
    }
}

fn run_job(session: &mut Session<'_>, job: Job) {
    match job {
        Job::Generate {
            request,
            tokens,
            reply,
        } => {
            if reply.is_closed() {
                return; // cancelled while queued
            }
            let mut on_text = |piece: &str| {
                if reply.is_closed() {
                    return ControlFlow::Break(());
                }
                match &tokens {
                    Some(tx) if tx.blocking_send(piece.to_owned()).is_err() => {
                        ControlFlow::Break(())
                    }
                    _ => ControlFlow::Continue(()),
                }
            };
            let result = session.generate(&request, &mut on_text);
            drop(tokens); // ends the stream before the final reply
            let _ = reply.send(result);
        }
        Job::Render { messages, reply } => {
            let _ = reply.send(session.render(&messages));
        }
        Job::Tokenize {
            text,
            add_special,
            reply,
        } => {
            let _ = reply.send(session.tokenize(&text, add_special));
        }
        Job::Detokenize { tokens, reply } => {
            let _ = reply.send(session.detokenize(&tokens));
        }
    }
}
