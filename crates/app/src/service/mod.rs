//! The request service: the one door every request goes through, whichever
//! door it came by (the server's runs API, chat completions streamed or
//! not, embeddings; a cluster worker), as TGI's `Infer` is for its router.
//! It speaks no protocol: it takes domain values and refuses with
//! [`ServiceError`], which each door translates (the server: one module
//! maps them to statuses).
//!
//! In order, it does:
//!
//! 1. admission ([`Service::admit`]): the topology (its promoted version,
//!    or the split's choice for the request's key), and a slot of its
//!    bounded concurrency, after a wait in its bounded queue ordered by
//!    priority band when it has one ([`queue`]), or a refusal; the
//!    request's band ([`priority`]), maximum run time ([`admission`]) and
//!    quota ([`quota`], [`limiter`]);
//! 2. the run, on the engine runtime ([`runtime`]), never on a door's own
//!    threads: while CPU-bound pipelines keep every core busy, new requests
//!    are still taken in and refused;
//! 3. cancellation when the caller goes away: dropping the answer's future,
//!    or the stream's receiver, cancels the run;
//! 4. token streaming of the topology's live nodes ([`stream`]);
//! 5. usage counting, from the spans ([`usage`]), settled against the
//!    caller's quota however the request ended;
//! 6. the trace hand-off ([`durable`]): when traces must commit first,
//!    nothing is answered before its trace has committed.
//!
//! What it needs from the door that runs it comes in as [`Parts`]: the
//! served topologies ([`Catalog`]), the settings it reads ([`Settings`]:
//! the server's config), and who hears what it does ([`Observer`]: the
//! server's metrics).

pub mod admission;
pub mod durable;
pub mod error;
pub mod finished;
pub mod limiter;
pub mod priority;
pub mod queue;
pub mod quota;
pub mod run;
pub mod runtime;
pub mod start;
pub mod stream;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use glassbox_store::StoreWriter;

pub use admission::{Admission, Ask};
pub use error::{RateMeasure, ServiceError};
pub use finished::{Finished, RunLimit};
pub use quota::{Cost, Counted};
pub use stream::{StreamEvent, Streaming};
pub use usage::TokenUsage;

use crate::catalog::Catalog;
use crate::served::Served;
use limiter::RateLimiter;
use queue::{Gates, Limits, Occupancy};
use runtime::EngineRuntime;

/// The settings the service reads, per topology (the server: its config
/// file).
pub trait Settings: Send + Sync {
    /// Topology `id`'s concurrency, queue and starvation bound.
    fn limits(&self, id: &str) -> Limits;
    /// Topology `id`'s maximum run time, when one is set.
    fn max_run_time(&self, id: &str) -> Option<Duration>;
    /// Whether an answer waits until its trace has committed.
    fn commit_traces(&self) -> bool;
}

/// Hears what the service does (the server: its metrics).
pub trait Observer: Occupancy {
    /// A request of `topology` (`-` when not yet known) was refused for
    /// `reason`.
    fn rejected(&self, topology: &str, reason: &str);
    /// A request of `topology` runs until the returned value is dropped.
    fn in_flight(&self, topology: &str) -> InFlight;
}

/// Held while a request runs: an [`Observer`]'s count of it, undone when
/// dropped.
pub type InFlight = Box<dyn Send + Sync>;

/// What a [`Service`] is built over.
pub struct Parts {
    pub catalog: Arc<Catalog>,
    pub settings: Arc<dyn Settings>,
    pub observer: Arc<dyn Observer>,
    pub writer: Arc<StoreWriter>,
    pub limiter: Arc<RateLimiter>,
}

/// The request service; one per door, shared by every request.
pub struct Service {
    catalog: Arc<Catalog>,
    settings: Arc<dyn Settings>,
    observer: Arc<dyn Observer>,
    writer: Arc<StoreWriter>,
    /// The keys' token buckets: requests are charged and settled here.
    limiter: Arc<RateLimiter>,
    gates: Gates,
    /// Where pipelines run: a runtime of their own, so a door waits for
    /// them without holding one of its own threads.
    engine: EngineRuntime,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// A service over the served topologies, with a new engine runtime.
    pub fn new(parts: Parts) -> std::io::Result<Service> {
        let Parts {
            catalog,
            settings,
            observer,
            writer,
            limiter,
        } = parts;
        let limits = {
            let settings = settings.clone();
            move |id: &str| settings.limits(id)
        };
        Ok(Service {
            gates: Gates::new(limits, observer.clone()),
            engine: EngineRuntime::new()?,
            catalog,
            settings,
            observer,
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
