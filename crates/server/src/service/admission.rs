//! Admission: a request gets a slot of its topology's bounded concurrency,
//! or 429 `overloaded` at once. Requests never wait in an unbounded queue,
//! so overload shows up as fast refusals, not as memory or latency.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use glassbox_engine::RunOptions;
use glassbox_trace::{Fact, NodeFacts, RequestId, VersionChoice};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Service;
use crate::catalog::Served;
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::InFlight;
use crate::versions::RequestKey;

/// One semaphore per topology id, kept across reloads so that a new version
/// does not get a fresh allowance while the old one still runs.
#[derive(Debug)]
pub struct Gates {
    config: Arc<Config>,
    map: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Gates {
    pub fn new(config: Arc<Config>) -> Gates {
        Gates {
            config,
            map: Mutex::default(),
        }
    }

    fn semaphore(&self, id: &str) -> Arc<Semaphore> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(id.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.config.concurrency_for(id))))
            .clone()
    }
}

/// A request allowed to run: holds its concurrency slot and in-flight count
/// until it is dropped, which the service does when the run ends (see
/// [`Admission::run`], [`Admission::run_each`], [`Admission::stream`]).
pub struct Admission {
    pub(super) service: Arc<Service>,
    pub served: Arc<Served>,
    /// Why this version was chosen (when several are loaded): told first in
    /// the request's explanation.
    pub why: Option<VersionChoice>,
    _permit: OwnedSemaphorePermit,
    _in_flight: InFlight,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("topology", &self.served.topology.id)
            .finish_non_exhaustive()
    }
}

impl Admission {
    /// Puts why this version was chosen into the request's options, so its
    /// explanation tells it first.
    pub(super) fn tell_version(&self, options: &mut RunOptions) {
        if let Some(why) = &self.why {
            options.facts.push(NodeFacts {
                node: self.served.topology.id.as_str().into(),
                kind: "topology".into(),
                facts: vec![Fact::VersionChosen(why.clone())],
            });
        }
    }
}

impl Service {
    /// Finds the topology and takes a concurrency slot, or answers 429 at
    /// once. With several versions loaded, the promoted one (or the split's
    /// choice for a random key).
    pub fn admit(self: &Arc<Self>, id: &str) -> Result<Admission, ApiError> {
        self.admit_keyed(id, None)
    }

    /// As [`Service::admit`], choosing the version by the request's key: the
    /// same key gets the same version while the split stands.
    pub fn admit_keyed(
        self: &Arc<Self>,
        id: &str,
        key: Option<&RequestKey>,
    ) -> Result<Admission, ApiError> {
        let chosen = self
            .catalog
            .choose(id, key, &RequestId::new().to_string())
            .ok_or_else(|| self.not_served(id))?;
        let sem = self.gates.semaphore(id);
        let permit = sem.try_acquire_owned().map_err(|_| {
            self.metrics.rejected(id, "overloaded");
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "overloaded",
                format!(
                    "topology `{id}` is running its limit of {} concurrent requests",
                    self.config.concurrency_for(id)
                ),
            )
            .hint("retry after the number of seconds in `Retry-After`, or raise `max_concurrency` for this topology")
            .retry_after(1)
        })?;
        Ok(Admission {
            service: self.clone(),
            served: chosen.served,
            why: chosen.why,
            _permit: permit,
            _in_flight: self.metrics.in_flight(id),
        })
    }
}
