//! One topology's gate: its `max_concurrency` slots and a bounded queue of
//! requests waiting for one, ordered by priority band.
//!
//! - A free slot goes at once to an arriving request (no one waits while a
//!   slot is free). With every slot busy, the request waits if the queue
//!   has room; with `max_queue = 0` (the default) it is refused at once,
//!   as before priorities existed.
//! - A slot freed goes to the most urgent band waiting (interactive, then
//!   online, then offline), oldest first within a band.
//! - **Never starved: a guaranteed minimum share, counted in grants.** A
//!   band that waits while `max_passed_over` slots in a row went to higher
//!   bands gets the next one. So each waiting band below the top is sure of
//!   at least one slot in `max_passed_over + 1` freed, whatever the load
//!   above it. Kubernetes' API Priority and Fairness assures each priority
//!   level a share of the concurrency for the same reason; vLLM's priority
//!   scheduling is strict and can starve. A share counted in grants rather
//!   than aging by clock keeps the bound independent of how long requests
//!   run, and the order testable without timing.
//! - **Shed lowest first.** With the queue full, an arriving request takes
//!   the place of the newest waiting request of a *lower* band, which is
//!   answered 429 `shed`; when none is lower, the arriving one is refused
//!   (429 `queue_full`). So offline work is the first to go under
//!   overload, and online work only when the queue is full of online work.
//!
//! Slots are RAII ([`Slot`]): dropping one (the run ended, or the request
//! was granted just as its client went away) hands it to the next waiter.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use glassbox_trace::Priority;
use tokio::sync::oneshot;

/// Hears how full each band of a gate is whenever that changes (the
/// server: its `glassbox_queue_*` gauges).
pub trait Occupancy: Send + Sync {
    /// `topology`'s running and waiting requests of `band`.
    fn band(&self, topology: &str, band: Priority, running: usize, waiting: usize);
}

const BANDS: usize = Priority::ALL.len();

/// The limits of one gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub slots: usize,
    pub queue: usize,
    pub max_passed_over: u32,
}

/// Why a request got no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Every slot busy and no queue (`max_queue = 0`).
    Full,
    /// Every slot busy and the queue full of requests of its band or higher.
    QueueFull,
    /// It waited, and a more urgent request took its place in the queue.
    Shed { by: Priority },
}

/// How a granted request waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waited {
    pub ms: u64,
    /// Requests of higher bands granted a slot while it waited.
    pub passed_over: u32,
}

/// A held slot; dropping it frees the slot for the next waiter.
#[derive(Debug)]
pub struct Slot {
    gate: Arc<Gate>,
    band: Priority,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.gate.release(self.band);
    }
}

struct Waiter {
    id: u64,
    since: Instant,
    passed_over: u32,
    reply: oneshot::Sender<Result<(Slot, Waited), Refused>>,
}

#[derive(Default)]
struct State {
    running: [usize; BANDS],
    waiting: [VecDeque<Waiter>; BANDS],
    /// Per band: slots granted in a row to higher bands while it waited.
    passed: [u32; BANDS],
    next_id: u64,
}

impl State {
    fn busy(&self) -> usize {
        self.running.iter().sum()
    }

    fn queued(&self) -> usize {
        self.waiting.iter().map(VecDeque::len).sum()
    }

    /// The band the next free slot goes to: a band passed over too often,
    /// else the most urgent one waiting.
    fn next_band(&self, max_passed_over: u32) -> Option<usize> {
        let waiting = |b: &usize| !self.waiting[*b].is_empty();
        (0..BANDS)
            .filter(waiting)
            .find(|&b| self.passed[b] >= max_passed_over)
            .or_else(|| (0..BANDS).find(waiting))
    }
}

/// One topology's slots and queue.
pub struct Gate {
    topology: String,
    limits: Limits,
    state: Mutex<State>,
    metrics: Arc<dyn Occupancy>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("topology", &self.topology)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Removes a waiter whose request went away (its future was dropped).
struct Leave<'a> {
    gate: &'a Gate,
    band: usize,
    id: u64,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        state.waiting[self.band].retain(|w| w.id != self.id);
        self.gate.publish(&state);
    }
}

impl Gate {
    pub fn new(topology: &str, limits: Limits, metrics: Arc<dyn Occupancy>) -> Arc<Gate> {
        let gate = Arc::new(Gate {
            topology: topology.to_string(),
            limits,
            state: Mutex::default(),
            metrics,
        });
        gate.publish(&gate.lock());
        gate
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, state: &State) {
        for p in Priority::ALL {
            let b = p.index();
            self.metrics
                .band(&self.topology, p, state.running[b], state.waiting[b].len());
        }
    }

    /// A slot for a request of `band`: at once, after a wait in the queue,
    /// or refused. Dropping the future leaves the queue.
    pub async fn acquire(self: &Arc<Self>, band: Priority) -> Result<(Slot, Waited), Refused> {
        let b = band.index();
        let (id, rx) = {
            let mut state = self.lock();
            if state.busy() < self.limits.slots && state.queued() == 0 {
                state.running[b] += 1;
                self.publish(&state);
                let slot = Slot {
                    gate: self.clone(),
                    band,
                };
                return Ok((slot, Waited::default()));
            }
            if self.limits.queue == 0 {
                return Err(Refused::Full);
            }
            let mut shed = None;
            if state.queued() >= self.limits.queue {
                // The newest waiter of the least urgent band below this one.
                let lower = (b + 1..BANDS).rev().find(|&l| !state.waiting[l].is_empty());
                match lower {
                    Some(l) => shed = state.waiting[l].pop_back(),
                    None => return Err(Refused::QueueFull),
                }
            }
            state.next_id += 1;
            let id = state.next_id;
            let (reply, rx) = oneshot::channel();
            state.waiting[b].push_back(Waiter {
                id,
                since: Instant::now(),
                passed_over: 0,
                reply,
            });
            self.publish(&state);
            drop(state);
            if let Some(w) = shed {
                let _ = w.reply.send(Err(Refused::Shed { by: band }));
            }
            (id, rx)
        };
        let leave = Leave {
            gate: self,
            band: b,
            id,
        };
        let granted = rx.await;
        // Granted or shed: no longer in the queue.
        std::mem::forget(leave);
        granted.unwrap_or(Err(Refused::QueueFull))
    }

    /// Frees a slot of `band` and hands free slots to waiters.
    fn release(self: &Arc<Self>, band: Priority) {
        let mut state = self.lock();
        state.running[band.index()] = state.running[band.index()].saturating_sub(1);
        let mut grants = Vec::new();
        while state.busy() < self.limits.slots {
            let Some(g) = state.next_band(self.limits.max_passed_over) else {
                break;
            };
            let Some(w) = state.waiting[g].pop_front() else {
                break;
            };
            state.passed[g] = 0;
            for lower in g + 1..BANDS {
                if !state.waiting[lower].is_empty() {
                    state.passed[lower] = state.passed[lower].saturating_add(1);
                    for other in &mut state.waiting[lower] {
                        other.passed_over = other.passed_over.saturating_add(1);
                    }
                }
            }
            state.running[g] += 1;
            grants.push((Priority::ALL[g], w));
        }
        self.publish(&state);
        drop(state);
        // Sent without the lock: a waiter that went away drops its slot,
        // which comes back here.
        for (band, w) in grants {
            let waited = Waited {
                ms: u64::try_from(w.since.elapsed().as_millis()).unwrap_or(u64::MAX),
                passed_over: w.passed_over,
            };
            let slot = Slot {
                gate: self.clone(),
                band,
            };
            let _ = w.reply.send(Ok((slot, waited)));
        }
    }
}

/// One gate per topology id, kept across reloads so that a new version
/// does not get a fresh allowance while the old one still runs.
pub struct Gates {
    /// Each topology's limits, read from the settings when its gate is
    /// first needed.
    limits: Box<dyn Fn(&str) -> Limits + Send + Sync>,
    metrics: Arc<dyn Occupancy>,
    map: Mutex<HashMap<String, Arc<Gate>>>,
}

impl std::fmt::Debug for Gates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gates").finish_non_exhaustive()
    }
}

impl Gates {
    /// Gates whose limits `limits` gives for each topology id.
    pub fn new(
        limits: impl Fn(&str) -> Limits + Send + Sync + 'static,
        metrics: Arc<dyn Occupancy>,
    ) -> Gates {
        Gates {
            limits: Box::new(limits),
            metrics,
            map: Mutex::default(),
        }
    }

    /// Topology `id`'s gate.
    pub fn gate(&self, id: &str) -> Arc<Gate> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(id.to_string())
            .or_insert_with(|| Gate::new(id, (self.limits)(id), self.metrics.clone()))
            .clone()
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
