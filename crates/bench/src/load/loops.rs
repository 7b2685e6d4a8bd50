//! How the load is driven: the closed loop (C clients, each sending when
//! answered) and the open loop (arrivals on their own clock, handed to a
//! pool of senders; a request no sender can take is recorded as not sent).
//! Each finished request adds one to a progress counter that the caller
//! may show.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::thread;
use std::time::{Duration, Instant};

use super::client::{Answer, Client};
use super::config::{Arrivals, OpenLoop, Stop};
use super::inputs::Input;
use crate::stats::{Outcome, Sample};

/// Shared state of one run: what to send, when measuring starts, results.
pub(super) struct Run {
    pub(super) client: Client,
    pub(super) inputs: Vec<Input>,
    pub(super) start: Instant,
    pub(super) warmup: Duration,
    pub(super) stop: Stop,
    pub(super) results: Sender<Record>,
}

/// One finished request.
pub(super) struct Record {
    pub(super) sample: Sample,
    pub(super) warmup: bool,
    pub(super) request_id: Option<String>,
}

impl Run {
    pub(super) fn measure_start(&self) -> Instant {
        self.start + self.warmup
    }

    /// Sends input `seq` (cycling), due at `due`, and records the answer.
    pub(super) fn send(&self, seq: u64, due: Instant, warmup: bool, tx: &Sender<Record>) {
        let input = &self.inputs[(seq % self.inputs.len() as u64) as usize];
        let answer = self.client.run(&input.body);
        self.record(input.bucket, due, warmup, answer, tx);
    }

    pub(super) fn record(
        &self,
        bucket: usize,
        due: Instant,
        warmup: bool,
        answer: Answer,
        tx: &Sender<Record>,
    ) {
        let now = Instant::now();
        let sample = Sample {
            bucket,
            latency_us: micros(now.saturating_duration_since(due)),
            done_us: micros(now.saturating_duration_since(self.measure_start())),
            outcome: answer.outcome,
        };
        // The receiver lives until every sender thread is joined.
        let _ = tx.send(Record {
            sample,
            warmup,
            request_id: answer.request_id,
        });
    }

    pub(super) fn sender(&self) -> Sender<Record> {
        self.results.clone()
    }
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Closed loop: `c` threads, each sending as soon as its last answer came.
pub(super) fn closed_loop(run: &Run, c: usize, progress: &AtomicU64) {
    let next = AtomicU64::new(0);
    let measured = AtomicU64::new(0);
    thread::scope(|s| {
        for _ in 0..c {
            let tx = run.sender();
            let (next, measured) = (&next, &measured);
            s.spawn(move || {
                loop {
                    let now = Instant::now();
                    let warmup = now < run.measure_start();
                    if !warmup {
                        match run.stop {
                            Stop::After(d) if now >= run.measure_start() + d => break,
                            Stop::Count(n) if measured.fetch_add(1, Ordering::Relaxed) >= n => {
                                break;
                            }
                            _ => {}
                        }
                    }
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    run.send(seq, now, warmup, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
}

/// A job for an open-loop sender thread.
pub(super) struct Job {
    pub(super) seq: u64,
    pub(super) due: Instant,
    pub(super) warmup: bool,
}

/// Open loop: arrivals on their own clock; requests no sender can take at
/// once are recorded as not sent.
pub(super) fn open_loop(run: &Run, open: &OpenLoop, progress: &AtomicU64) {
    let OpenLoop {
        rate,
        arrivals,
        senders,
        seed,
    } = *open;
    // A short queue absorbs scheduling jitter between the dispatcher and the
    // senders; anything beyond it means the client is saturated.
    let (jobs, queue): (SyncSender<Job>, Receiver<Job>) = mpsc::sync_channel((senders / 4).max(4));
    let queue = Mutex::new(queue);
    let tx = run.sender();
    thread::scope(|s| {
        for _ in 0..senders {
            let queue = &queue;
            let tx = run.sender();
            s.spawn(move || {
                loop {
                    let job = match queue.lock() {
                        Ok(q) => q.recv(),
                        Err(_) => break,
                    };
                    let Ok(job) = job else { break };
                    run.send(job.seq, job.due, job.warmup, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut due = run.start;
        let mut measured = 0u64;
        let mut seq = 0u64;
        loop {
            let gap = match arrivals {
                Arrivals::Fixed => 1.0 / rate,
                // Inverse transform: -ln(U)/rate with U in (0, 1].
                Arrivals::Poisson => -(1.0 - rng.f64()).ln() / rate,
            };
            due += Duration::from_secs_f64(gap);
            let warmup = due < run.measure_start();
            if !warmup {
                let over = match run.stop {
                    Stop::After(d) => due >= run.measure_start() + d,
                    Stop::Count(n) => measured >= n,
                };
                if over {
                    break;
                }
                measured += 1;
            }
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            match jobs.try_send(Job { seq, due, warmup }) {
                Ok(()) => {}
                Err(TrySendError::Full(job)) => {
                    let input = &run.inputs[(job.seq % run.inputs.len() as u64) as usize];
                    let answer = Answer {
                        outcome: Outcome::NotSent,
                        request_id: None,
                    };
                    run.record(input.bucket, job.due, job.warmup, answer, &tx);
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
            seq += 1;
        }
        drop(jobs);
    });
}
