//! Dispatch to cluster workers (`glassbox serve --cluster`, docs/cluster.md
//! "Placement and failover").
//!
//! When the server runs with a worker [`Pool`], it puts one [`Dispatcher`]
//! into every pipeline's build context. An `llm_inference` or `embedding`
//! node tagged `resource: {type: gpu}` (with the default `local` backend)
//! then does not load its model in the coordinator: each call is placed on
//! a worker ([`glassbox_cluster::placement`]) and sent to the worker's
//! OpenAI-compatible API through the same [`Endpoint`] client the `openai`
//! backend uses. CPU-tagged nodes, and nodes with an explicit `openai`
//! backend, run as they always do.
//!
//! The dispatcher owns what placement learns and remembers, shared by every
//! pipeline of the server: each worker's circuit [`Breaker`] and last probe
//! result, the (model, hardware) throughput [`Profiles`], the round-robin
//! totals per (kind, model), the calls in flight per worker, and the
//! affinity bindings of running requests, when each worker was last heard
//! working, the workers known dead, the retry budget, and the calls
//! waiting for room. [`call`] holds the failover loop, [`probe`] the
//! liveness probes, [`verdict`] how a failure is judged (slow is not
//! dead), [`waiting`] who waits for a full pool.

pub mod call;
pub mod probe;
pub mod verdict;
pub mod waiting;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use glassbox_cluster::placement::{self, Affinity, Ask, Candidate, Placement, Settings};
use glassbox_cluster::{
    Breaker, BreakerSettings, BudgetSettings, Load, Member, Pool, Profiles, RetryBudget, Spent,
    Swrr,
};
use glassbox_engine::trace::{FailedAttempt, FilterMiss, Placed, PlacedCandidate, RequestId};

use crate::openai::Endpoint;
use crate::outbound::{Client, WorkerTimeouts};
pub use wire::{START_WITHIN_HEADER, WATCHED_HEADER, WORKER_KEY_ENV};

/// How the dispatcher places, times out and probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DispatchOptions {
    pub placement: Settings,
    pub breaker: BreakerSettings,
    /// The longest a worker may stay silent during a call (to connect, to
    /// its first byte, between two streamed pieces) before the call is
    /// taken as hung and moves to another worker.
    pub attempt_timeout: Duration,
    /// Most workers one call is sent to (the first and its failovers).
    pub max_attempts: u32,
    /// How often every worker gets a liveness probe (a real one-token chat
    /// completion, or a one-word embedding on embedding-only workers).
    pub probe_interval: Duration,
    /// How long a probe may take before the worker counts as hung.
    pub probe_timeout: Duration,
    /// How many failovers the coordinator may add to its calls.
    pub budget: BudgetSettings,
}

impl Default for DispatchOptions {
    fn default() -> Self {
        DispatchOptions {
            placement: Settings::default(),
            breaker: BreakerSettings::default(),
            attempt_timeout: Duration::from_secs(10),
            max_attempts: 3,
            probe_interval: Duration::from_secs(3),
            probe_timeout: Duration::from_secs(5),
            budget: BudgetSettings::default(),
        }
    }
}

/// How long an affinity binding outlives its last use (requests end long
/// before; this only bounds the memory of abandoned ones).
const BINDING_TTL: Duration = Duration::from_secs(600);

/// Places node calls on the pool's workers; cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("workers", &self.inner.pool.len())
            .field("options", &self.inner.options)
            .finish()
    }
}

struct Inner {
    pool: Pool,
    options: DispatchOptions,
    state: Mutex<State>,
    waiters: waiting::Waiters,
}

struct State {
    breakers: HashMap<String, Breaker>,
    /// Workers whose last probe failed, and why.
    probe_failed: HashMap<String, String>,
    /// Workers known dead (refused a connection, to a call or a probe),
    /// and why: out of placement, panic mode included.
    dead: HashMap<String, String>,
    /// When each worker last showed it works: a progress event, a piece
    /// of text or an answer on any call.
    heard: HashMap<String, Instant>,
    budget: RetryBudget,
    profiles: Profiles,
    rounds: HashMap<(String, String), Swrr>,
    bindings: HashMap<(RequestId, String), (String, Instant)>,
    /// Calls in flight per worker: (call id, Unix millisecond it started).
    inflight: HashMap<String, Vec<(u64, u64)>>,
    next_call: u64,
    /// One client per worker, for its address.
    clients: HashMap<String, (String, Client)>,
}

/// What one node call asks of the pool.
#[derive(Debug, Clone, Copy)]
pub struct Spec<'a> {
    /// `llm_inference` or `embedding`.
    pub kind: &'a str,
    /// The model it asks for (`resource.model`).
    pub model: Option<&'a str>,
    /// The node's affinity group and its request, when it has one.
    pub affinity: Option<(&'a str, RequestId)>,
}

/// A worker chosen for one attempt.
pub struct Chosen {
    pub worker: String,
    pub hardware: String,
    pub endpoint: Endpoint,
    pub placement: Placement,
}

impl Dispatcher {
    pub fn new(pool: Pool, options: DispatchOptions) -> Dispatcher {
        let state = State {
            breakers: HashMap::new(),
            probe_failed: HashMap::new(),
            dead: HashMap::new(),
            heard: HashMap::new(),
            budget: RetryBudget::new(options.budget),
            profiles: Profiles::default(),
            rounds: HashMap::new(),
            bindings: HashMap::new(),
            inflight: HashMap::new(),
            next_call: 0,
            clients: HashMap::new(),
        };
        Dispatcher {
            inner: Arc::new(Inner {
                pool,
                options,
                state: Mutex::new(state),
                waiters: waiting::Waiters::default(),
            }),
        }
    }

    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    pub fn options(&self) -> &DispatchOptions {
        &self.inner.options
    }

    /// The calls waiting for room on a full pool, per (kind, model).
    pub fn waiters(&self) -> &waiting::Waiters {
        &self.inner.waiters
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn timeouts(&self) -> WorkerTimeouts {
        WorkerTimeouts {
            silence: self.inner.options.attempt_timeout,
            ..WorkerTimeouts::default()
        }
    }

    /// Why `worker` must not get work now; `None` when it may.
    pub fn unhealthy(&self, worker: &str) -> Option<String> {
        let state = self.state();
        unhealthy(&state, worker, Instant::now())
    }

    /// Places one attempt of a call, given the workers it already failed
    /// on. `Err` is the placement that found nobody (for its reasons).
    pub fn choose(&self, spec: &Spec<'_>, tried: &[String]) -> Result<Chosen, Placement> {
        let members = self.inner.pool.snapshot();
        let now = Instant::now();
        let now_secs = glassbox_cluster::member::now_secs();
        let mut state = self.state();
        let known: Vec<&str> = members.iter().map(|m| m.record.id.as_str()).collect();
        forget_departed(&mut state, &known);
        let health: Vec<Option<String>> = members
            .iter()
            .map(|m| unhealthy(&state, &m.record.id, now))
            .collect();
        let pending: Vec<u64> = members.iter().map(|m| pending(&state, m)).collect();
        let candidates: Vec<Candidate<'_>> = members
            .iter()
            .enumerate()
            .map(|(i, m)| Candidate {
                member: m,
                unhealthy: health[i].as_deref(),
                dead: state.dead.contains_key(&m.record.id),
                pending: pending[i],
            })
            .collect();
        let bound = spec.affinity.and_then(|(group, request)| {
            state
                .bindings
                .get(&(request, group.to_string()))
                .map(|(w, _)| w.clone())
        });
        let ask = Ask {
            kind: spec.kind,
            model: spec.model,
            affinity: spec.affinity.map(|(group, _)| Affinity {
                group,
                bound: bound.as_deref(),
            }),
            tried,
        };
        let key = (spec.kind.to_string(), spec.model.unwrap_or("").to_string());
        let State {
            profiles, rounds, ..
        } = &mut *state;
        let swrr = rounds.entry(key).or_default();
        let placement = placement::place(
            &ask,
            &candidates,
            profiles,
            swrr,
            &self.inner.options.placement,
            now_secs,
        );
        let Some(i) = placement.chosen else {
            return Err(placement);
        };
        let member: &Member = &members[i];
        let id = member.record.id.clone();
        if let Some((group, request)) = spec.affinity {
            prune_bindings(&mut state.bindings, now);
            state
                .bindings
                .insert((request, group.to_string()), (id.clone(), now));
        }
        let breaker_settings = self.inner.options.breaker;
        state
            .breakers
            .entry(id.clone())
            .or_insert_with(|| Breaker::new(breaker_settings))
            .begin(now);
        let client = client_for(&mut state, member, self.timeouts());
        drop(state);
        Ok(Chosen {
            worker: id,
            hardware: member.record.hardware.name().to_string(),
            endpoint: Endpoint::for_worker(
                &member.record.address,
                spec.model.unwrap_or_default(),
                client,
                self.timeouts(),
            ),
            placement,
        })
    }

    /// Marks a call as in flight on `worker` until the guard drops.
    pub fn begin(&self, worker: &str) -> InFlight {
        let mut state = self.state();
        state.next_call += 1;
        let id = state.next_call;
        state
            .inflight
            .entry(worker.to_string())
            .or_default()
            .push((id, glassbox_cluster::member::now_ms()));
        InFlight {
            dispatcher: self.clone(),
            worker: worker.to_string(),
            id,
        }
    }

    /// A call on `worker` succeeded at `tokens_per_second` (if measured).
    pub fn succeeded(&self, worker: &str, model: &str, hardware: &str, tps: Option<f64>) {
        let mut state = self.state();
        if let Some(b) = state.breakers.get_mut(worker) {
            b.success();
        }
        state.dead.remove(worker);
        state.heard.insert(worker.to_string(), Instant::now());
        if let Some(t) = tps {
            state.profiles.observe(model, hardware, t);
        }
    }

    /// A call on `worker` was given up by its caller: no verdict on the
    /// worker (a half-open circuit's trial is freed).
    pub fn abandoned(&self, worker: &str) {
        if let Some(b) = self.state().breakers.get_mut(worker) {
            b.abandon();
        }
    }

    /// `worker` showed it works (a progress event or a piece of text).
    pub fn heard(&self, worker: &str) {
        self.state()
            .heard
            .insert(worker.to_string(), Instant::now());
    }

    /// A call's first attempt is being sent (the retry budget's base).
    pub fn called(&self) {
        self.state().budget.called(Instant::now());
    }

    /// Spends one failover from the retry budget, or says why not.
    pub fn may_retry(&self) -> Result<(), Spent> {
        self.state().budget.try_retry(Instant::now())
    }

    /// A call on `worker` failed with `error` (retryable, not overload):
    /// judged by [`verdict::judge`]. Returns whether it counted against
    /// the worker.
    pub fn failed(&self, worker: &str, error: &str) -> bool {
        let settings = self.inner.options.breaker;
        let now = Instant::now();
        let window = self.inner.options.attempt_timeout;
        let mut state = self.state();
        let working = self.working(&state, worker, now, window);
        match verdict::judge(error, working) {
            verdict::Verdict::Busy => {
                if let Some(b) = state.breakers.get_mut(worker) {
                    b.abandon();
                }
                return false;
            }
            verdict::Verdict::Dead => {
                state
                    .dead
                    .insert(worker.to_string(), verdict::refused_reason(error));
            }
            verdict::Verdict::Failed => {}
        }
        state
            .breakers
            .entry(worker.to_string())
            .or_insert_with(|| Breaker::new(settings))
            .failure(now);
        true
    }

    /// Whether `worker` showed within `window` that it works: this
    /// coordinator heard from it, or its load (fresh, not older than the
    /// placement's `fresh_for`) says it runs or queues calls.
    fn working(&self, state: &State, worker: &str, now: Instant, window: Duration) -> bool {
        let heard = state
            .heard
            .get(worker)
            .is_some_and(|at| now.saturating_duration_since(*at) <= window);
        heard
            || self.inner.pool.get(worker).is_some_and(|m| {
                m.load.as_ref().is_some_and(|l| {
                    let age = glassbox_cluster::member::now_secs().saturating_sub(l.at);
                    age <= self.inner.options.placement.fresh_for.as_secs()
                        && l.running + l.waiting > 0
                })
            })
    }

    /// The learned rate for (model, hardware), if any call finished.
    pub fn profile(&self, model: &str, hardware: &str) -> Option<f64> {
        self.state().profiles.get(model, hardware)
    }

    /// Records a probe's outcome for `worker`. A probe that timed out
    /// while the worker shows it works (progress on calls, a busy load) is
    /// queued behind real work, and one answered 429 met a full worker:
    /// neither is a sign of death, and neither counts anything. A
    /// refused probe marks it dead; one that failed otherwise while the
    /// worker was idle makes it suspect (out of placement unless every
    /// other worker is out too: slow is not dead).
    pub(crate) fn probed(&self, worker: &str, result: Result<(), String>) {
        let settings = self.inner.options.breaker;
        let now = Instant::now();
        let o = &self.inner.options;
        let mut state = self.state();
        let working = match &result {
            Ok(()) => false,
            Err(_) => self.working(&state, worker, now, o.probe_interval + o.probe_timeout),
        };
        let breaker = state
            .breakers
            .entry(worker.to_string())
            .or_insert_with(|| Breaker::new(settings));
        match result {
            Ok(()) => {
                breaker.success();
                state.probe_failed.remove(worker);
                state.dead.remove(worker);
            }
            Err(why) => match verdict::judge(&why, working) {
                verdict::Verdict::Busy => {
                    // Alive (full, or queued behind real work): whatever
                    // an earlier probe concluded, it is not dead.
                    breaker.abandon();
                    state.probe_failed.remove(worker);
                    state.dead.remove(worker);
                }
                verdict::Verdict::Dead => {
                    breaker.failure(now);
                    state
                        .dead
                        .insert(worker.to_string(), verdict::refused_reason(&why));
                    state.probe_failed.insert(worker.to_string(), why);
                }
                verdict::Verdict::Failed => {
                    // Silent while idle: suspect, out of placement while
                    // others can take the call, but not known dead. A
                    // machine too loaded to answer within the probe
                    // timeout is slow; when every other worker is out
                    // too, panic mode still tries it.
                    breaker.failure(now);
                    state.probe_failed.insert(worker.to_string(), why);
                }
            },
        }
    }

    /// The probe client of a worker (whole-call limit: the probe timeout).
    pub(crate) fn probe_client(&self, member: &Member) -> Client {
        Client::for_worker(
            host_of(&member.record.address).as_deref().unwrap_or(""),
            WorkerTimeouts {
                silence: self.inner.options.probe_timeout,
                total: self.inner.options.probe_timeout,
            },
        )
    }
}

/// A call in flight on a worker; dropping it ends the call.
pub struct InFlight {
    dispatcher: Dispatcher,
    worker: String,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.dispatcher.state();
        if let Some(calls) = state.inflight.get_mut(&self.worker) {
            calls.retain(|(id, _)| *id != self.id);
        }
    }
}

fn unhealthy(state: &State, worker: &str, now: Instant) -> Option<String> {
    if let Some(why) = state.dead.get(worker) {
        return Some(format!("dead: {why}"));
    }
    if let Some(Err(why)) = state.breakers.get(worker).map(|b| b.admits(now)) {
        return Some(why);
    }
    state
        .probe_failed
        .get(worker)
        .map(|why| format!("last liveness probe failed: {why}"))
}

/// Calls this coordinator started on `m` since its load was measured (to
/// the millisecond: a call the report already counts as running is not
/// counted twice, which at whole seconds made a busy worker look up to a
/// second's worth of calls busier than it was).
fn pending(state: &State, m: &Member) -> u64 {
    let since = m.load.as_ref().map_or(0, Load::measured_ms);
    state.inflight.get(&m.record.id).map_or(0, |calls| {
        calls.iter().filter(|(_, at)| *at >= since).count() as u64
    })
}

/// Drops what the dispatcher kept about workers that left the pool.
fn forget_departed(state: &mut State, known: &[&str]) {
    let keep = |id: &str| known.contains(&id);
    state.breakers.retain(|id, _| keep(id));
    state.probe_failed.retain(|id, _| keep(id));
    state.dead.retain(|id, _| keep(id));
    state.heard.retain(|id, _| keep(id));
    state.clients.retain(|id, _| keep(id));
    for swrr in state.rounds.values_mut() {
        swrr.retain(keep);
    }
}

fn prune_bindings(bindings: &mut HashMap<(RequestId, String), (String, Instant)>, now: Instant) {
    if bindings.len() >= 1024 {
        bindings.retain(|_, (_, at)| now.saturating_duration_since(*at) < BINDING_TTL);
    }
}

fn client_for(state: &mut State, member: &Member, timeouts: WorkerTimeouts) -> Client {
    let address = &member.record.address;
    if let Some((a, c)) = state.clients.get(&member.record.id)
        && a == address
    {
        return c.clone();
    }
    let client = Client::for_worker(host_of(address).as_deref().unwrap_or(""), timeouts);
    state
        .clients
        .insert(member.record.id.clone(), (address.clone(), client.clone()));
    client
}

/// The host of a worker address (IPv6 without brackets).
fn host_of(address: &str) -> Option<String> {
    let url = url::Url::parse(address).ok()?;
    Some(
        url.host_str()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

/// The trace's account of a placement: the chosen worker, the rule, every
/// candidate with the filters it failed, and the workers failed on first.
pub fn placed_fact(
    chosen: &Chosen,
    model: Option<&str>,
    affinity: Option<&str>,
    failed: &[FailedAttempt],
) -> Placed {
    let p = &chosen.placement;
    Placed {
        worker: chosen.worker.clone(),
        hardware: chosen.hardware.clone(),
        model: model.map(str::to_string),
        rule: p.rule.as_str().to_string(),
        affinity: affinity.map(str::to_string),
        rebound_from: p.rebound_from.clone(),
        candidates: p
            .candidates
            .iter()
            .map(|a| PlacedCandidate {
                worker: a.worker.clone(),
                hardware: a.hardware.clone(),
                failed: a
                    .checks
                    .iter()
                    .filter(|c| !c.passed)
                    .map(|c| FilterMiss {
                        filter: c.filter.as_str().to_string(),
                        detail: c.detail.clone(),
                    })
                    .collect(),
                load: a
                    .checks
                    .iter()
                    .find(|c| c.filter == placement::Filter::Load)
                    .map(|c| c.detail.clone()),
                score: a.score,
            })
            .collect(),
        failed: failed.to_vec(),
    }
}

#[cfg(test)]
mod tests;
