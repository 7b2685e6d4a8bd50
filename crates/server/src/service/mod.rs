//! The request service: the one door every request goes through, whichever
//! API it came by (`/v1/topologies/{id}/runs`, chat completions streamed or
//! not, embeddings), as TGI's `Infer` is for its router.
//!
//! In order, it does:
//!
//! 1. admission ([`Service::admit`]): the topology, and a slot of its bounded
//!    concurrency, after a wait in its bounded queue ordered by priority
//!    band when it has one ([`glassbox_app::service::queue`]), or a refusal; the request's band
//!    ([`glassbox_app::service::priority`]) and maximum run time
//!    ([`admission`]);
//! 2. the run, on the engine runtime ([`glassbox_app::service::runtime`]),
//!    never on an HTTP worker: while CPU-bound pipelines keep every core
//!    busy, new requests are still parsed and refused;
//! 3. cancellation when the client goes away: dropping the answer's future,
//!    or the stream's receiver, cancels the run;
//! 4. token streaming of the topology's live nodes ([`stream`]);
//! 5. usage counting, from the spans ([`glassbox_app::service::usage`]),
//!    and the key's quota charged and settled in one place
//!    ([`glassbox_app::service::quota`]);
//! 6. the trace hand-off ([`durable`]): with `[store] durability = "commit"`
//!    nothing is answered before its trace has committed.
//!
//! It refuses with domain errors ([`glassbox_app::ServiceError`]); the one
//! module that turns them into statuses is [`crate::error`]. Handlers only
//! translate: they parse their API's request, call the service and shape
//! its answer. The protocol-free parts live in the application layer
//! (`glassbox_app::service`) and move there as they lose their ties to the
//! server (its config and metrics).

pub mod admission;
pub mod durable;
pub mod priority;
pub mod run;
pub mod start;
pub mod stream;

use std::sync::Arc;

use glassbox_store::StoreWriter;

pub use admission::{Admission, Ask};
pub use glassbox_app::service::quota::{Cost, Counted};
pub use glassbox_app::service::{Finished, RunLimit};
pub use glassbox_app::service::{TokenUsage, usage};
pub use stream::{StreamEvent, Streaming};

use crate::auth::RateLimiter;
use crate::config::Config;
use crate::metrics::Metrics;
use glassbox_app::ServiceError;
use glassbox_app::catalog::Catalog;
use glassbox_app::served::Served;
use glassbox_app::service::queue::{Gates, Limits};
use glassbox_app::service::runtime::EngineRuntime;

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
            gates: {
                let config = config.clone();
                let limits = move |id: &str| Limits {
                    slots: config.concurrency_for(id),
                    queue: config.queue_for(id),
                    max_passed_over: config.priorities.max_passed_over.max(1),
                };
                Gates::new(limits, metrics.clone())
            },
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
