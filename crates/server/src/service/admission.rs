//! Admission: a request gets a slot of its topology's bounded concurrency,
//! or 429 `overloaded` at once. Requests never wait in an unbounded queue,
//! so overload shows up as fast refusals, not as memory or latency.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Service;
use crate::catalog::Served;
use crate::config::Config;
use crate::error::ApiError;
use crate::metrics::InFlight;

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

impl Service {
    /// Finds the topology and takes a concurrency slot, or answers 429 at
    /// once.
    pub fn admit(self: &Arc<Self>, id: &str) -> Result<Admission, ApiError> {
        let served = self.topology(id)?;
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
            served,
            _permit: permit,
            _in_flight: self.metrics.in_flight(id),
        })
    }
}
