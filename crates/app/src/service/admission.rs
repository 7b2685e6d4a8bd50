//! Admission: a request gets a slot of its topology's bounded concurrency,
//! after a wait in a bounded queue ordered by priority band
//! ([`queue`](super::queue)), or a refusal at once. With no queue configured
//! (`max_queue = 0`, the default) a full topology refuses at once, so
//! overload shows up as fast refusals, not as memory or latency.
//!
//! Admission also settles what the run is allowed: its band (asked for,
//! capped by the key, see [`priority`](super::priority)) and its maximum
//! run time (the smaller of the topology's and the key's `max_run_time`),
//! and tells both to the engine and to the request's trace.

use std::sync::Arc;
use std::time::Duration;

use glassbox_engine::RunOptions;
use glassbox_trace::{Fact, NodeFacts, Priority, RequestId, Scheduling, VersionChoice};

use super::finished::RunLimit;

use super::InFlight;
use super::Service;
use super::ServiceError;
use super::limiter::Caller;
use super::queue::{Limits, Refused, Slot};
use super::quota::{Charge, Cost};
use crate::served::Served;
use crate::versions::RequestKey;

/// What a request asks of admission besides its topology.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    /// Picks the version under a traffic split (same key, same version).
    pub key: Option<&'a RequestKey>,
    /// The band it asked for (see [`priority::asked`](super::priority::asked)).
    pub priority: Option<Priority>,
    /// Who asks: its key's `max_priority` and `max_run_time` apply.
    pub caller: Option<&'a Caller>,
}

/// A request allowed to run: holds its slot and in-flight count until it
/// is dropped, which the service does when the run ends (see
/// [`Admission::run`], [`Admission::run_each`], [`Admission::stream`]).
pub struct Admission {
    pub(super) service: Arc<Service>,
    pub served: Arc<Served>,
    /// Why this version was chosen (when several are loaded): told first in
    /// the request's explanation.
    pub why: Option<VersionChoice>,
    /// Its band, its wait, its run-time limit: recorded in its trace.
    pub scheduling: Scheduling,
    /// The maximum run time it runs under, when one is set below the
    /// topology's own `deadline_ms`.
    pub run_limit: Option<RunLimit>,
    /// The caller's cap on tokens per model call (OpenAI `max_tokens`).
    pub max_tokens: Option<u64>,
    /// What the caller's key is charged, settled when the request ends.
    charge: Option<Charge>,
    /// The caller's tools and answer format for the LLM nodes.
    pub model_ask: Option<Arc<glassbox_engine::ModelAsk>>,
    _slot: Slot,
    _in_flight: InFlight,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("topology", &self.served.topology.id)
            .field("priority", &self.scheduling.priority)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Takes the rest of the request's `cost` from its caller's buckets (the
    /// guard took one unit), or answers 429 naming the limit; dropping the
    /// admission then frees its slot. The tokens are settled against the
    /// estimate when the request ends, however it ends ([`Admission::run`],
    /// [`Admission::run_each`], [`Admission::stream`]).
    pub fn charge(&mut self, cost: Cost) -> Result<(), ServiceError> {
        match self.charge.as_mut() {
            Some(charge) => charge
                .take(cost)
                .inspect_err(|e| self.service.observer.rejected("-", e.code())),
            None => Ok(()),
        }
    }

    /// The charge to settle when the request ends, taken out of the
    /// admission (which is dropped as soon as the run ends, to free its
    /// slot).
    pub(super) fn take_charge(&mut self) -> Option<Charge> {
        self.charge.take()
    }

    /// Puts what admission settled into the request's options: why this
    /// version was chosen (told first), its band and wait, and its
    /// maximum run time as the engine's deadline.
    pub(super) fn prepare(&self, options: &mut RunOptions) {
        let node: Arc<str> = self.served.topology.id.as_str().into();
        if let Some(why) = &self.why {
            options.facts.push(NodeFacts {
                node: node.clone(),
                kind: "topology".into(),
                facts: vec![Fact::VersionChosen(why.clone())],
            });
        }
        options.facts.push(NodeFacts {
            node,
            kind: "admission".into(),
            facts: vec![Fact::Scheduled(self.scheduling.clone())],
        });
        options.priority = self.scheduling.priority;
        options.max_tokens = self.max_tokens;
        options.model_ask = self.model_ask.clone();
        if let Some(limit) = &self.run_limit {
            options.deadline = Some(limit.limit);
        }
    }
}

impl Service {
    /// Finds the topology and takes a slot of it, waiting in its queue when
    /// it has one, or answers 429. With several versions loaded, the
    /// promoted one (or the split's choice for `ask.key`).
    pub async fn admit(
        self: &Arc<Self>,
        id: &str,
        ask: Ask<'_>,
    ) -> Result<Admission, ServiceError> {
        let chosen = self
            .catalog
            .choose(id, ask.key, &RequestId::new().to_string())
            .ok_or_else(|| self.not_served(id))?;
        let (priority, lowered) = super::priority::band(ask.priority, ask.caller);
        let gate = self.gates.gate(id);
        let (slot, waited) = gate
            .acquire(priority)
            .await
            .map_err(|refused| self.refusal(id, priority, gate.limits(), refused))?;
        let run_limit = self.run_limit(id, ask.caller, chosen.served.topology.deadline);
        let scheduling = Scheduling {
            priority,
            asked: lowered,
            key: lowered.and(ask.caller.map(|c| c.name.clone())),
            waited_ms: waited.ms,
            passed_over: waited.passed_over,
            max_run_time_ms: run_limit
                .as_ref()
                .map(|l| u64::try_from(l.limit.as_millis()).unwrap_or(u64::MAX)),
            max_run_time_from: run_limit.as_ref().map(|l| l.from.clone()),
        };
        Ok(Admission {
            service: self.clone(),
            served: chosen.served,
            why: chosen.why,
            scheduling,
            run_limit,
            max_tokens: None,
            charge: ask
                .caller
                .map(|c| Charge::nothing_yet(self.limiter.clone(), c)),
            model_ask: None,
            _slot: slot,
            _in_flight: self.observer.in_flight(id),
        })
    }

    /// The smaller of the topology's and the key's `max_run_time`, when it
    /// is below the topology's own deadline (else that deadline ends the
    /// run first, as before).
    fn run_limit(
        &self,
        id: &str,
        caller: Option<&Caller>,
        deadline: Option<Duration>,
    ) -> Option<RunLimit> {
        let topology = self.settings.max_run_time(id).map(|limit| RunLimit {
            limit,
            from: format!("topology `{id}`"),
            setting: format!("`[topologies.{id}] max_run_time`"),
        });
        let key = caller.and_then(|c| {
            c.max_run_time.map(|limit| RunLimit {
                limit,
                from: format!("key `{}`", c.name),
                setting: format!("`max_run_time` of key `{}` (`[[keys]]`)", c.name),
            })
        });
        [topology, key]
            .into_iter()
            .flatten()
            .min_by_key(|l| l.limit)
            .filter(|l| deadline.is_none_or(|d| l.limit < d))
    }

    /// Why admission turned a request away (counted in the metrics).
    fn refusal(&self, id: &str, band: Priority, limits: Limits, refused: Refused) -> ServiceError {
        let topology = id.to_string();
        let slots = limits.slots;
        let (reason, err) = match refused {
            Refused::Full => (
                "overloaded",
                ServiceError::Overloaded {
                    topology,
                    slots,
                    queue: None,
                },
            ),
            Refused::QueueFull => (
                "queue_full",
                ServiceError::Overloaded {
                    topology,
                    slots,
                    queue: Some((limits.queue, band)),
                },
            ),
            Refused::Shed { by } => (
                "shed",
                ServiceError::Shed {
                    topology,
                    band,
                    by,
                    queue: limits.queue,
                },
            ),
        };
        self.observer.rejected(id, reason);
        err
    }
}
