//! The batch one model's worker thread runs: requests waiting for a slot,
//! running, or preempted, and the free slots. One [`Batch::turn`] takes the
//! jobs that arrived, drops requests nobody waits for, resumes preempted
//! requests, admits new ones (most urgent, then oldest first, while their
//! KV cells fit), makes room in a pooled KV cache, and runs one step over
//! the batch, finishing the requests that are done.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use super::pool::Pool;
use super::schedule::{self, Turn};
use super::sequence::Sequence;
use super::session::Session;
use super::stats::Load;
use super::throttle;
use super::{ChatMessage, Completion, GenerateRequest, LlmError};

/// What the worker can be asked to do.
pub(super) enum Job {
    Generate {
        request: GenerateRequest,
        arrived: Instant,
        tokens: Option<mpsc::UnboundedSender<String>>,
        /// Someone reads `tokens` as they come, so their pace matters
        /// (chunked prefill protects it); false for pieces relayed to a
        /// caller that reads the answer whole.
        watched: bool,
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

/// A generate job waiting for a place in the batch.
struct Waiting {
    request: GenerateRequest,
    arrived: Instant,
    /// More urgent requests admitted while it waited (see [`schedule`]).
    passed: u32,
    tokens: Option<mpsc::UnboundedSender<String>>,
    watched: bool,
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

/// The worker's requests and slots, over its session.
pub(super) struct Batch<'m> {
    session: Session<'m>,
    load: Arc<Load>,
    pool: Pool,
    max_seqs: usize,
    kv_cells: usize,
    waiting: VecDeque<Waiting>,
    running: Vec<Running>,
    /// Requests preempted when the KV pool ran out: they resume before any
    /// new request of their priority or a lower one is admitted, most
    /// urgent then oldest first (see `schedule`).
    preempted: VecDeque<Running>,
    free_ids: Vec<i32>,
    /// Whether the job channel may still bring jobs.
    open: bool,
}

impl<'m> Batch<'m> {
    pub(super) fn new(
        session: Session<'m>,
        load: Arc<Load>,
        pool: Pool,
        max_seqs: usize,
        kv_cells: usize,
    ) -> Self {
        Batch {
            session,
            load,
            pool,
            max_seqs,
            kv_cells,
            waiting: VecDeque::new(),
            running: Vec::new(),
            preempted: VecDeque::new(),
            free_ids: (0..max_seqs as i32).rev().collect(),
            open: true,
        }
    }

    /// One turn of the worker's loop; `false` once every handle is gone
    /// and the last request has finished.
    pub(super) fn turn(&mut self, queue: &Receiver<Job>) -> bool {
        if !self.take_jobs(queue) {
            return false;
        }
        self.end_abandoned_preempted();
        self.resume_preempted();
        self.admit();
        let (host_hits, host_bytes) = self.session.host_usage();
        self.load
            .prefix_host_hits
            .store(host_hits, Ordering::Relaxed);
        self.load
            .host_cache_bytes
            .store(host_bytes, Ordering::Relaxed);
        let (placed, chunk_bytes) = self.session.chunk_usage();
        self.load
            .chunk_placed_tokens
            .store(placed, Ordering::Relaxed);
        self.load
            .chunk_cache_bytes
            .store(chunk_bytes, Ordering::Relaxed);
        if self.pool.pooled {
            self.make_room();
        }
        self.publish();
        if !self.running.is_empty() {
            self.step();
        }
        true
    }

    /// Takes jobs: blocks only when there is nothing to run. Generate jobs
    /// leave the bounded channel only when the batch can soon take them,
    /// so the channel stays the queue whose capacity callers see. `false`
    /// when nothing is left to do and no job can come.
    fn take_jobs(&mut self, queue: &Receiver<Job>) -> bool {
        if self.running.is_empty() && self.waiting.is_empty() && self.preempted.is_empty() {
            if !self.open {
                return false;
            }
            match queue.recv() {
                Ok(job) => take(job, &mut self.session, &mut self.waiting),
                Err(_) => return false,
            }
        }
        while self.open && self.waiting.len() < self.max_seqs {
            match queue.try_recv() {
                Ok(job) => take(job, &mut self.session, &mut self.waiting),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => self.open = false,
            }
        }
        self.waiting.retain(|w| !w.reply.is_closed());
        true
    }

    /// A preempted request nobody waits for ends here.
    fn end_abandoned_preempted(&mut self) {
        for r in std::mem::take(&mut self.preempted) {
            if r.abandoned() {
                let Running {
                    mut seq,
                    tokens,
                    reply,
                    ..
                } = r;
                seq.cancel();
                complete(&mut self.session, &self.load, seq, tokens, reply);
            } else {
                self.preempted.push_back(r);
            }
        }
    }

    /// Resumes preempted requests while a slot and their cells are free,
    /// unless a more urgent request waits.
    fn resume_preempted(&mut self) {
        let (waiting, preempted, running) = (&self.waiting, &mut self.preempted, &mut self.running);
        while !self.free_ids.is_empty() {
            let Some(at) = schedule::next(preempted.iter().map(Running::turn)) else {
                break;
            };
            let first =
                schedule::next(waiting.iter().map(Waiting::turn)).map(|i| waiting[i].turn());
            if !schedule::resumes_first(preempted[at].turn(), first)
                || !self
                    .pool
                    .admits(running.iter().map(|r| &r.seq), preempted[at].seq.feed_len())
            {
                break;
            }
            let mut r = preempted.remove(at).expect("index from `next`");
            r.passed = 0;
            let placed = self
                .session
                .place(&self.free_ids, &slots(running), r.seq.prompt());
            let id = self.free_ids.remove(placed.at);
            self.session.attach(&mut r.seq, id, &placed);
            running.push(r);
        }
    }

    /// Admits, most urgent then oldest first (see `schedule`), while a
    /// slot is free and the KV cells for the whole request (prompt +
    /// max_tokens; with a pool, the prompt) are, and no preempted request
    /// goes before it.
    fn admit(&mut self) {
        let (waiting, preempted, running) =
            (&mut self.waiting, &mut self.preempted, &mut self.running);
        let mut reserved: usize = running.iter().map(|r| r.seq.reserve()).sum();
        while let Some(at) = schedule::next(waiting.iter().map(Waiting::turn)) {
            let turn = waiting[at].turn();
            let resuming = schedule::next(preempted.iter().map(Running::turn))
                .is_some_and(|p| schedule::resumes_first(preempted[p].turn(), Some(turn)));
            if self.free_ids.is_empty() || resuming {
                break;
            }
            match self
                .session
                .start(&waiting[at].request, waiting[at].arrived)
            {
                Err(e) => {
                    let w = waiting.remove(at).expect("index from `next`");
                    let _ = w.reply.send(Err(e));
                }
                Ok(mut seq) => {
                    let fits = if self.pool.pooled {
                        self.pool
                            .admits(running.iter().map(|r| &r.seq), seq.feed_len())
                    } else {
                        reserved + seq.reserve() <= self.kv_cells
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
                    let placed = self
                        .session
                        .place(&self.free_ids, &slots(running), seq.prompt());
                    let id = self.free_ids.remove(placed.at);
                    let reused = self.session.attach(&mut seq, id, &placed);
                    self.load
                        .prefix_queries
                        .fetch_add(seq.prompt().len() as u64, Ordering::Relaxed);
                    self.load
                        .prefix_hits
                        .fetch_add(reused as u64, Ordering::Relaxed);
                    reserved += seq.reserve();
                    seq.streamed = w.tokens.is_some() && w.watched;
                    running.push(Running {
                        seq,
                        tokens: w.tokens,
                        reply: w.reply,
                        passed: 0,
                    });
                }
            }
        }
    }

    /// With a pool: makes room for this step's cells, first from cached
    /// prefixes nobody uses, then by preempting the least urgent request,
    /// the newest among equals.
    fn make_room(&mut self) {
        loop {
            let short = self.pool.shortfall(
                self.running.iter().map(|r| &r.seq),
                self.session.cached_cells(&self.free_ids),
            );
            if short == 0 {
                break;
            }
            if self.session.cached_cells(&self.free_ids) > 0 {
                self.session.evict_cached(&self.free_ids);
                continue;
            }
            if self.running.len() <= 1 {
                break; // alone it fits: its budget is capped by the pool
            }
            let last =
                schedule::victim(self.running.iter().map(|r| (r.seq.priority, r.seq.arrived)))
                    .expect("more than one running");
            let mut victim = self.running.remove(last);
            self.free_ids.push(victim.seq.id);
            self.session.preempt(&mut victim.seq);
            self.load.preemptions.fetch_add(1, Ordering::Relaxed);
            self.preempted.push_front(victim);
        }
    }

    /// One step over the running batch, then the finished requests end. A
    /// panic inside llama.cpp's bindings fails the requests in hand, not
    /// the worker.
    fn step(&mut self) {
        for r in &mut self.running {
            if r.abandoned() {
                r.seq.cancel();
            }
        }
        let before: u64 = self
            .running
            .iter()
            .map(|r| u64::from(r.seq.completion_tokens))
            .sum();
        // With a test slowdown (benchmarks only), output waits out the
        // extra time first, as on slower hardware.
        let mut throttle = throttle::Step::start();
        let (session, running) = (&mut self.session, &mut self.running);
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
        self.load
            .prefix_hits
            .fetch_add(self.session.take_shared_hits(), Ordering::Relaxed);
        let failure = match stepped {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("the llama.cpp bindings panicked".to_owned()),
        };
        if let Some(detail) = failure {
            self.session.release_all();
            let failed = std::mem::take(&mut self.running);
            self.publish();
            for r in failed {
                self.free_ids.push(r.seq.id);
                let _ = r.reply.send(Err(LlmError::Decode(detail.clone())));
            }
            return;
        }
        let after: u64 = self
            .running
            .iter()
            .map(|r| u64::from(r.seq.completion_tokens))
            .sum();
        self.load
            .generation_tokens
            .fetch_add(after.saturating_sub(before), Ordering::Relaxed);
        // The load is published before the replies go out, so a caller
        // that has its answer never sees its request still counted.
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].seq.is_finished() {
                done.push(self.running.remove(i));
            } else {
                i += 1;
            }
        }
        self.publish();
        for Running {
            seq, tokens, reply, ..
        } in done
        {
            self.free_ids.push(seq.id);
            complete(&mut self.session, &self.load, seq, tokens, reply);
        }
    }

    /// Publishes the load: running, waiting (preempted included), KV cells.
    pub(super) fn publish(&self) {
        publish(
            &self.load,
            &self.running,
            self.waiting.len() + self.preempted.len(),
            &self.pool,
        );
    }
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
            watched,
            reply,
        } => {
            if !reply.is_closed() {
                waiting.push_back(Waiting {
                    request,
                    arrived,
                    passed: 0,
                    tokens,
                    watched,
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
