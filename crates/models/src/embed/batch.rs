//! Dynamic batching of concurrent embedding calls.
//!
//! Callers that each embed a text or two (an `embedding` node per request,
//! semantic routing, `/v1/embeddings`) queue their token ids here. One of
//! them at a time, the leader, takes everything queued (up to the batch
//! size) and runs one forward pass for all; the others wait for their rows.
//! A caller alone runs at once; under load, the calls that arrived while a
//! pass ran share the next one. An optional wait window lets the leader
//! gather more before it runs. No thread of its own: blocking callers do
//! the work, as they did before.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::EmbedError;

/// One forward pass over a batch of token-id rows: a vector per row.
pub(super) type Forward<'a> = dyn Fn(&[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> + 'a;

/// One text waiting for its vector.
struct Row {
    ids: Vec<u32>,
    vector: OnceLock<Result<Vec<f32>, String>>,
}

#[derive(Default)]
struct Queue {
    rows: VecDeque<Arc<Row>>,
    /// Whether a leader is gathering or running a pass.
    busy: bool,
}

/// Forward passes run and rows embedded through the queue, since load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    pub passes: u64,
    pub rows: u64,
}

pub(super) struct Coalescer {
    queue: Mutex<Queue>,
    turn: Condvar,
    max_rows: usize,
    window: Duration,
    passes: AtomicU64,
    rows: AtomicU64,
}

impl Coalescer {
    pub(super) fn new(max_rows: usize, window: Duration) -> Self {
        Self {
            queue: Mutex::default(),
            turn: Condvar::new(),
            max_rows: max_rows.max(1),
            window,
            passes: AtomicU64::new(0),
            rows: AtomicU64::new(0),
        }
    }

    pub(super) fn stats(&self) -> BatchStats {
        BatchStats {
            passes: self.passes.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Rows are only pushed and drained under the lock, so a panic
        // elsewhere leaves the queue consistent.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Embeds `inputs` (token ids) together with whatever other callers
    /// queued; `forward` runs one pass over a batch of rows.
    pub(super) fn embed(
        &self,
        inputs: Vec<Vec<u32>>,
        forward: &Forward<'_>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mine: Vec<Arc<Row>> = inputs
            .into_iter()
            .map(|ids| {
                Arc::new(Row {
                    ids,
                    vector: OnceLock::new(),
                })
            })
            .collect();
        let mut queue = self.lock();
        queue.rows.extend(mine.iter().cloned());
        // A leader gathering in its window may now have enough.
        self.turn.notify_all();
        while !mine.iter().all(|r| r.vector.get().is_some()) {
            if queue.busy {
                queue = self
                    .turn
                    .wait(queue)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                continue;
            }
            queue.busy = true;
            if !self.window.is_zero() {
                let until = Instant::now() + self.window;
                while queue.rows.len() < self.max_rows {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    queue = self
                        .turn
                        .wait_timeout(queue, until - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
            let n = queue.rows.len().min(self.max_rows);
            let batch: Vec<Arc<Row>> = queue.rows.drain(..n).collect();
            drop(queue);
            self.run(&batch, forward);
            queue = self.lock();
            queue.busy = false;
            self.turn.notify_all();
        }
        drop(queue);
        mine.iter()
            .map(|r| match r.vector.get() {
                Some(Ok(v)) => Ok(v.clone()),
                Some(Err(detail)) => Err(EmbedError::Inference(detail.clone())),
                None => Err(EmbedError::Inference("no output".to_owned())),
            })
            .collect()
    }

    /// One pass over `batch`; every row gets its vector or the error.
    fn run(&self, batch: &[Arc<Row>], forward: &Forward<'_>) {
        let ids: Vec<&[u32]> = batch.iter().map(|r| r.ids.as_slice()).collect();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| forward(&ids)))
            .unwrap_or_else(|_| Err(EmbedError::Inference("the forward pass panicked".into())));
        match result {
            Ok(vectors) if vectors.len() == batch.len() => {
                for (row, v) in batch.iter().zip(vectors) {
                    let _ = row.vector.set(Ok(v));
                }
            }
            Ok(vectors) => {
                let detail = format!("{} vectors for {} texts", vectors.len(), batch.len());
                for row in batch {
                    let _ = row.vector.set(Err(detail.clone()));
                }
            }
            Err(e) => {
                let detail = e.to_string();
                for row in batch {
                    let _ = row.vector.set(Err(detail.clone()));
                }
            }
        }
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(batch.len() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in forward pass for the queue's own tests (no model): each
    /// row's vector is its ids as floats; it records the batch sizes it saw.
    fn fake_forward(
        seen: &Mutex<Vec<usize>>,
        delay: Duration,
    ) -> impl Fn(&[&[u32]]) -> Result<Vec<Vec<f32>>, EmbedError> + '_ {
        move |batch| {
            seen.lock().unwrap().push(batch.len());
            std::thread::sleep(delay);
            Ok(batch
                .iter()
                .map(|ids| ids.iter().map(|&i| i as f32).collect())
                .collect())
        }
    }

    #[test]
    fn a_caller_alone_gets_its_own_rows_in_one_pass() {
        let q = Coalescer::new(8, Duration::ZERO);
        let seen = Mutex::new(Vec::new());
        let out = q
            .embed(
                vec![vec![1, 2], vec![3]],
                &fake_forward(&seen, Duration::ZERO),
            )
            .unwrap();
        assert_eq!(out, vec![vec![1.0, 2.0], vec![3.0]]);
        assert_eq!(*seen.lock().unwrap(), vec![2]);
        assert_eq!(q.stats(), BatchStats { passes: 1, rows: 2 });
    }

    #[test]
    fn concurrent_callers_share_passes_and_get_their_own_vectors() {
        let q = Coalescer::new(4, Duration::ZERO);
        let seen = Mutex::new(Vec::new());
        let forward = fake_forward(&seen, Duration::from_millis(20));
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..12u32)
                .map(|i| {
                    let (q, forward) = (&q, &forward);
                    s.spawn(move || q.embed(vec![vec![i, i + 100]], forward).unwrap())
                })
                .collect();
            for (i, h) in handles.into_iter().enumerate() {
                let i = i as f32;
                assert_eq!(h.join().unwrap(), vec![vec![i, i + 100.0]]);
            }
        });
        let sizes = seen.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 12);
        assert!(sizes.iter().all(|&n| n <= 4), "{sizes:?}");
        // While the first pass sleeps, the others queue up and share passes.
        assert!(sizes.len() < 12, "no pass was shared: {sizes:?}");
    }

    #[test]
    fn a_failed_pass_fails_every_row_in_it_and_the_queue_goes_on() {
        let q = Coalescer::new(4, Duration::ZERO);
        let fail = |_: &[&[u32]]| -> Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError::Inference("boom".into()))
        };
        let err = q.embed(vec![vec![1]], &fail).unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        let panics = |_: &[&[u32]]| -> Result<Vec<Vec<f32>>, EmbedError> { panic!("inside") };
        let err = q.embed(vec![vec![1]], &panics).unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        let seen = Mutex::new(Vec::new());
        let ok = q.embed(vec![vec![5]], &fake_forward(&seen, Duration::ZERO));
        assert_eq!(ok.unwrap(), vec![vec![5.0]]);
    }

    #[test]
    fn the_window_gathers_callers_that_arrive_within_it() {
        let q = Coalescer::new(3, Duration::from_secs(5));
        let seen = Mutex::new(Vec::new());
        let forward = fake_forward(&seen, Duration::ZERO);
        std::thread::scope(|s| {
            for i in 0..3u32 {
                let (q, forward) = (&q, &forward);
                s.spawn(move || q.embed(vec![vec![i]], forward).unwrap());
            }
        });
        // The batch filled up (3 rows) long before the 5 s window ended.
        assert_eq!(*seen.lock().unwrap(), vec![3]);
    }
}
