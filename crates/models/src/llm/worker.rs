//! The queue in front of a model: a cloneable handle, a bounded job channel,
//! one worker thread running the admitted requests as one batch, and a
//! oneshot reply per request.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::load::{dims, load_model};
use super::pool::Pool;
use super::schedule::{self, Turn};
use super::sequence::Sequence;
use super::session::Session;
use super::stats::{EngineLoad, Load};
use super::stream::CompletionStream;
use super::throttle;
use super::{ChatMessage, Completion, GenerateRequest, LlmError, LlmOptions, ModelDims, validate};
use crate::hash::version_tag;

/// What the worker can be asked to do.
enum Job {
    Generate {
        request: GenerateRequest,
        arrived: Instant,
        tokens: Option<mpsc::UnboundedSender<String>>,
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
    ) -> Result<oneshot::Receiver<Result<Completion, LlmError>>, LlmError> {
        validate(&request)?;
        let (reply, done) = oneshot::channel();
        self.submit(Job::Generate {
            request,
            arrived: Instant::now(),
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
        let (tx, tokens) = mpsc::unbounded_channel();
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

/// A generate job waiting for a place in the batch.
struct Waiting {
    request: GenerateRequest,
    arrived: Instant,
    /// More urgent requests admitted while it waited (see [`schedule`]).
    passed: u32,
    tokens: Option<mpsc::UnboundedSender<String>>,
    reply: oneshot::Sender<Result<Completion, LlmError>>,
}

impl Waiting {
    fn turn(&self) -> Turn {
        Turn {
            priority: self.request.priority,
            arrived: self.arrived,
            passed: self.passed,
        }
    }
}

/// A request in the running batch.
struct Running {
    seq: Sequence,
    tokens: Option<mpsc::UnboundedSender<String>>,
    reply: oneshot::Sender<Result<Completion, LlmError>>,
    /// Once preempted: more urgent requests admitted while it waited to
    /// resume (see [`schedule`]), so a preempted request is not starved.
    passed: u32,
}

impl Running {
    fn turn(&self) -> Turn {
        Turn {
            priority: self.seq.priority,
            arrived: self.seq.arrived,
            passed: self.passed,
        }
    }

    /// Whether nobody waits for this request any more.
    fn abandoned(&self) -> bool {
        self.reply.is_closed() || self.tokens.as_ref().is_some_and(|t| t.is_closed())
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
    let mut session = match Session::new(&model, &options, version.clone()) {
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
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let mut running: Vec<Running> = Vec::new();
    // Requests preempted when the KV pool ran out: they resume before any
    // new request of their priority or a lower one is admitted, most urgent
    // then oldest first (see `schedule`).
    let mut preempted: VecDeque<Running> = VecDeque::new();
    let mut free_ids: Vec<i32> = (0..max_seqs as i32).rev().collect();
    let mut open = true;
    loop {
        // Take jobs: block only when there is nothing to run. Generate jobs
        // leave the bounded channel only when the batch can soon take them,
        // so the channel stays the queue whose capacity callers see.
        if running.is_empty() && waiting.is_empty() && preempted.is_empty() {
            if !open {
                break;
            }
            match queue.recv() {
                Ok(job) => take(job, &mut session, &mut waiting),
                Err(_) => break,
            }
        }
        while open && waiting.len() < max_seqs {
            match queue.try_recv() {
                Ok(job) => take(job, &mut session, &mut waiting),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        waiting.retain(|w| !w.reply.is_closed());
        // A preempted request nobody waits for ends here.
        for r in std::mem::take(&mut preempted) {
            if r.abandoned() {
                let Running {
                    mut seq,
                    tokens,
                    reply,
                    ..
                } = r;
                seq.cancel();
                complete(&mut session, &load, seq, tokens, reply);
            } else {
                preempted.push_back(r);
            }
        }
        // Resume preempted requests while a slot and their cells are free,
        // unless a more urgent request waits.
        while !free_ids.is_empty() {
            let Some(at) = schedule::next(preempted.iter().map(Running::turn)) else {
                break;
            };
            let first =
                schedule::next(waiting.iter().map(Waiting::turn)).map(|i| waiting[i].turn());
            if !schedule::resumes_first(preempted[at].turn(), first)
                || !pool.admits(running.iter().map(|r| &r.seq), preempted[at].seq.feed_len())
            {
                break;
            }
            let mut r = preempted.remove(at).expect("index from `next`");
            r.passed = 0;
            let placed = session.place(&free_ids, &slots(&running), r.seq.prompt());
            let id = free_ids.remove(placed.at);
            session.attach(&mut r.seq, id, &placed);
            running.push(r);
        }
        // Admit, most urgent then oldest first (see `schedule`), while a
        // slot is free and the KV cells for the whole request (prompt +
        // max_tokens; with a pool, the prompt) are, and no preempted
        // request goes before it.
        let mut reserved: usize = running.iter().map(|r| r.seq.reserve()).sum();
        while let Some(at) = schedule::next(waiting.iter().map(Waiting::turn)) {
            let turn = waiting[at].turn();
            let resuming = schedule::next(preempted.iter().map(Running::turn))
                .is_some_and(|p| schedule::resumes_first(preempted[p].turn(), Some(turn)));
            if free_ids.is_empty() || resuming {
                break;
            }
            match session.start(&waiting[at].request, waiting[at].arrived) {
                Err(e) => {
                    let w = waiting.remove(at).expect("index from `next`");
                    let _ = w.reply.send(Err(e));
                }
                Ok(mut seq) => {
                    let fits = if pool.pooled {
                        pool.admits(running.iter().map(|r| &r.seq), seq.feed_len())
                    } else {
                        reserved + seq.reserve() <= kv_cells as usize
                    };
                    if !fits && !running.is_empty() {
                        break; // wait for a running request to free cells
                    }
                    let w = waiting.remove(at).expect("index from `next`");
                    schedule::pass_over(
                        turn.priority,
                        waiting
                            .iter_mut()
                            .map(|w| (w.request.priority, &mut w.passed)),
                    );
                    schedule::pass_over(
                        turn.priority,
                        preempted
                            .iter_mut()
                            .map(|r| (r.seq.priority, &mut r.passed)),
                    );
                    // Next to the running sequences, with the longest prefix.
                    let placed = session.place(&free_ids, &slots(&running), seq.prompt());
                    let id = free_ids.remove(placed.at);
                    let reused = session.attach(&mut seq, id, &placed);
                    load.prefix_queries
                        .fetch_add(seq.prompt().len() as u64, Ordering::Relaxed);
                    load.prefix_hits.fetch_add(reused as u64, Ordering::Relaxed);
                    reserved += seq.reserve();
                    running.push(Running {
                        seq,
                        tokens: w.tokens,
                        reply: w.reply,
                        passed: 0,
                    });
                }
            }
        }
        let (host_hits, host_bytes) = session.host_usage();
        load.prefix_host_hits.store(host_hits, Ordering::Relaxed);
        load.host_cache_bytes.store(host_bytes, Ordering::Relaxed);
        // With a pool: make room for this step's cells, first from cached
        // prefixes nobody uses, then by preempting the least urgent request,
        // the newest among equals.
        if pool.pooled {
            loop {
                let short = pool.shortfall(
                    running.iter().map(|r| &r.seq),
                    session.cached_cells(&free_ids),
                );
                if short == 0 {
                    break;
                }
                if session.cached_cells(&free_ids) > 0 {
                    session.evict_cached(&free_ids);
                    continue;
                }
                if running.len() <= 1 {
                    break; // alone it fits: its budget is capped by the pool
                }
                let last =
                    schedule::victim(running.iter().map(|r| (r.seq.priority, r.seq.arrived)))
                        .expect("more than one running");
                let mut victim = running.remove(last);
                free_ids.push(victim.seq.id);
                session.preempt(&mut victim.seq);
                load.preemptions.fetch_add(1, Ordering::Relaxed);
                preempted.push_front(victim);
            }
        }
        publish(&load, &running, waiting.len() + preempted.len(), &pool);
        if running.is_empty() {
            continue;
        }
        for r in &mut running {
            if r.abandoned() {
                r.seq.cancel();
            }
        }
        // One step over the batch. A panic inside llama.cpp's bindings fails
        // the requests in hand, not the worker.
        let before: u64 = running
            .iter()
            .map(|r| u64::from(r.seq.completion_tokens))
            .sum();
        // With a test slowdown (benchmarks only), output waits out the
        // extra time first, as on slower hardware.
        let mut throttle = throttle::Step::start();
        let stepped = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let (mut seqs, senders): (Vec<&mut Sequence>, Vec<_>) = running
                .iter_mut()
                .map(|r| (&mut r.seq, r.tokens.as_ref()))
                .unzip();
            session.step(&mut seqs, &mut |i, piece| {
                if let Some(t) = throttle.as_mut() {
                    t.pause();
                }
                match senders[i] {
                    Some(tx) if tx.send(piece.to_owned()).is_err() => ControlFlow::Break(()),
                    _ => ControlFlow::Continue(()),
                }
            })
        }));
        if let Some(t) = throttle.as_mut() {
            t.pause();
        }
        let failure = match stepped {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the llama.cpp bindings panicked".to_owned()),
        };
        if let Some(detail) = failure {
            session.release_all();
            let failed = std::mem::take(&mut running);
            publish(&load, &running, waiting.len() + preempted.len(), &pool);
            for r in failed {
                free_ids.push(r.seq.id);
                let _ = r.reply.send(Err(LlmError::Decode(detail.clone())));
            }
            continue;
        }
        let after: u64 = running
            .iter()
            .map(|r| u64::from(r.seq.completion_tokens))
            .sum();
        load.generation_tokens
            .fetch_add(after.saturating_sub(before), Ordering::Relaxed);
        // The load is published before the replies go out, so a caller
        // that has its answer never sees its request still counted.
        let mut done = Vec::new();
        let mut i = 0;
        while i < running.len() {
            if running[i].seq.is_finished() {
                done.push(running.remove(i));
            } else {
                i += 1;
            }
        }
        publish(&load, &running, waiting.len() + preempted.len(), &pool);
        for Running {
            seq, tokens, reply, ..
        } in done
        {
            free_ids.push(seq.id);
            complete(&mut session, &load, seq, tokens, reply);
        }
    }
    publish(&load, &running, waiting.len() + preempted.len(), &pool);
}

/// Ends a finished (or abandoned) request: assembles its completion, sends
/// the rest of its text and the reply, and records its latencies.
fn complete(
    session: &mut Session<'_>,
    load: &Load,
    seq: Sequence,
    tokens: Option<mpsc::UnboundedSender<String>>,
    reply: oneshot::Sender<Result<Completion, LlmError>>,
) {
    let completion = session.finish(seq, &mut |rest| {
        if let Some(tx) = &tokens {
            let _ = tx.send(rest.to_owned());
        }
    });
    drop(tokens); // ends the stream before the final reply
    load.latencies.observe(&completion.timing);
    if completion.draft_tokens > 0 {
        load.spec_drafts.fetch_add(1, Ordering::Relaxed);
        load.spec_draft_tokens
            .fetch_add(u64::from(completion.draft_tokens), Ordering::Relaxed);
        load.spec_accepted_tokens
            .fetch_add(u64::from(completion.accepted_tokens), Ordering::Relaxed);
    }
    let _ = reply.send(Ok(completion));
}

/// The slots of the running sequences.
fn slots(running: &[Running]) -> Vec<i32> {
    running.iter().map(|r| r.seq.id).collect()
}

fn publish(load: &Load, running: &[Running], waiting: usize, pool: &Pool) {
    load.running.store(running.len(), Ordering::Relaxed);
    load.waiting.store(waiting, Ordering::Relaxed);
    // A full context per request is reserved at admission; a pool holds
    // what the sequences filled (cached prefixes of free slots count as
    // free, as in vLLM: they are evicted before anything is preempted).
    let used = if pool.pooled {
        running.iter().map(|r| r.seq.held()).sum::<usize>()
    } else {
        running.iter().map(|r| r.seq.reserve()).sum()
    };
    load.kv_reserved.store(used, Ordering::Relaxed);
}

/// Serves a job that needs no batch slot at once; queues a generate job.
fn take(job: Job, session: &mut Session<'_>, waiting: &mut VecDeque<Waiting>) {
    match job {
        Job::Generate {
            request,
            arrived,
            tokens,
            reply,
        } => {
            if !reply.is_closed() {
                waiting.push_back(Waiting {
                    request,
                    arrived,
                    passed: 0,
                    tokens,
                    reply,
                });
            }
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
