//! The request service: the one door every request goes through, whichever
//! API it came by (`/v1/topologies/{id}/runs`, chat completions streamed or
//! not, embeddings), as TGI's `Infer` is for its router.
//!
//! In order, it does:
//!
//! 1. admission ([`Service::admit`]): the topology, and a slot of its bounded
//!    concurrency, after a wait in its bounded queue ordered by priority
//!    band when it has one ([`queue`]), or 429 with `Retry-After`; the
//!    request's band ([`priority`]) and maximum run time ([`admission`]);
//! 2. the run, on the engine runtime ([`runtime`]), never on an HTTP worker:
//!    while CPU-bound pipelines keep every core busy, new requests are still
//!    parsed and refused with 429;
//! 3. cancellation when the client goes away: dropping the answer's future,
//!    or the stream's receiver, cancels the run;
//! 4. token streaming of the topology's live nodes ([`stream`]);
//! 5. usage counting, from the spans ([`usage`]);
//! 6. the trace hand-off ([`durable`]): with `[store] durability = "commit"`
//!    nothing is answered before its trace has committed (503
//!    `trace_not_stored` otherwise).
//!
//! Handlers only translate: they parse their API's request, call the
//! service and shape its answer. What requests need next in general
//! (choosing a topology version, priority bands, dispatch to workers) goes
//! here, not into a handler.

pub mod admission;
pub mod durable;
mod finished;
pub mod priority;
pub mod queue;
pub mod quota;
pub mod run;
pub mod runtime;
pub mod start;
pub mod stream;
pub mod usage;

use std::sync::Arc;

use glassbox_store::StoreWriter;

pub use admission::{Admission, Ask, RunLimit};
pub use finished::Finished;
pub use quota::{Cost, Counted};
pub use stream::{StreamEvent, Streaming};
pub use usage::TokenUsage;

use crate::auth::RateLimiter;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::metrics::Metrics;
use glassbox_app::ServiceError;
use glassbox_app::served::Served;
use queue::Gates;
use runtime::EngineRuntime;

/// What a [`Service`] is built over.
#[derive(Debug)]
pub struct Parts {
    pub catalog: Arc<Catalog>,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub writer: Arc<StoreWriter>,
    pub limiter: Arc<RateLimiter>,
}

/// The request service; one per server, shared by every handler.
#[derive(Debug)]
pub struct Service {
    catalog: Arc<Catalog>,
    config: Arc<Config>,
    metrics: Arc<Metrics>,
    writer: Arc<StoreWriter>,
    /// The keys' token buckets: requests are charged and settled here.
    limiter: Arc<RateLimiter>,
    gates: Gates,
    /// Where pipelines run: a runtime of their own, so HTTP handlers wait
    /// for them without holding an HTTP worker.
    engine: EngineRuntime,
}

impl Service {
    /// A service over the served topologies, with a new engine runtime.
    pub fn new(parts: Parts) -> std::io::Result<Service> {
        let Parts {
            catalog,
            config,
            metrics,
            writer,
            limiter,
        } = parts;
        Ok(Service {
            gates: Gates::new(config.clone(), metrics.clone()),
            engine: EngineRuntime::new()?,
            catalog,
            config,
            metrics,
            writer,
            limiter,
        })
    }

    /// The served topology `id`, or why not, naming the ones that exist.
    pub fn topology(&self, id: &str) -> Result<Arc<Served>, ServiceError> {
        self.catalog.get(id).ok_or_else(|| self.not_served(id))
    }

    /// `id` is not served: the closest served id, or the served ones.
    pub fn not_served(&self, id: &str) -> ServiceError {
        let served = self.catalog.ids();
        let closest = glassbox_topology::diagnostic::closest(id, served.iter().map(String::as_str))
            .map(str::to_string);
        ServiceError::NotServed {
            id: id.to_string(),
            closest,
            served,
        }
    }
}
