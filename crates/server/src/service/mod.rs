//! The request service, as the server runs it: the service itself is the
//! application layer's ([`glassbox_app::service`], the one door every
//! request goes through, as TGI's `Infer` is for its router); here it is
//! given the server's settings (its config file) and observer (its
//! metrics), and the HTTP-only pieces sit beside it: reading the priority
//! header ([`priority`]) and a worker's "can this call start in time?"
//! header ([`start`]).
//!
//! The service refuses with domain errors ([`glassbox_app::ServiceError`]);
//! the one module that turns them into statuses is [`crate::error`].
//! Handlers only translate: they parse their API's request, call the
//! service and shape its answer.

pub mod priority;
pub mod start;

use std::time::Duration;

use glassbox_app::service::queue::Limits;
pub use glassbox_app::service::{
    Admission, Ask, Cost, Counted, Finished, Parts, RunLimit, Service, StreamEvent, Streaming,
    TokenUsage, durable, usage,
};
use glassbox_app::service::{InFlight, Observer, Settings};

use crate::config::{Config, Durability};
use crate::metrics::Metrics;

impl Settings for Config {
    fn limits(&self, id: &str) -> Limits {
        Limits {
            slots: self.concurrency_for(id),
            queue: self.queue_for(id),
            max_passed_over: self.priorities.max_passed_over.max(1),
        }
    }

    fn max_run_time(&self, id: &str) -> Option<Duration> {
        self.run_time_for(id)
    }

    fn commit_traces(&self) -> bool {
        self.store.durability == Durability::Commit
    }
}

impl Observer for Metrics {
    fn rejected(&self, topology: &str, reason: &str) {
        Metrics::rejected(self, topology, reason);
    }

    fn in_flight(&self, topology: &str) -> InFlight {
        Box::new(Metrics::in_flight(self, topology))
    }
}
