//! The trace hand-off: with `[store] durability = "commit"` (the default) a
//! request's answer waits until its trace has committed, so no answer names
//! a trace that a crash could still lose; a trace that cannot be stored is
//! a `trace_not_stored` refusal instead of an answer.

use glassbox_store::Durable;
use glassbox_trace::RequestId;

pub use glassbox_app::service::durable::{all_committed, committed};

use super::Service;
use crate::config::Durability;

impl Service {
    /// With `durability = "commit"`, a ticket for request `id`, which has
    /// not run yet: [`committed`] then waits until its trace has committed,
    /// sharing the commit with every other request waiting at the time
    /// (group commit). `None` with `async`.
    pub fn ticket(&self, id: RequestId) -> Option<Durable> {
        (self.config.store.durability == Durability::Commit).then(|| self.writer.durable(id))
    }
}
