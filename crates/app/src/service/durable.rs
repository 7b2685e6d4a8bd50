//! The trace hand-off: with `[store] durability = "commit"` (the default) a
//! request's answer waits until its trace has committed, so no answer names
//! a trace that a crash could still lose; a trace that cannot be stored is
//! a `trace_not_stored` refusal instead of an answer.

use glassbox_store::Durable;
use glassbox_trace::RequestId;

use super::Service;
use super::error::ServiceError;

impl Service {
    /// When traces must commit before answers leave (`durability =
    /// "commit"`), a ticket for request `id`, which has not run yet:
    /// [`committed`] then waits until its trace has committed, sharing the
    /// commit with every other request waiting at the time (group commit).
    /// `None` otherwise.
    pub fn ticket(&self, id: RequestId) -> Option<Durable> {
        self.settings
            .commit_traces()
            .then(|| self.writer.durable(id))
    }
}

/// Waits for a ticket from [`Service::ticket`], once its request has ended;
/// `None` (durability `async`) returns at once.
pub async fn committed(ticket: Option<Durable>) -> Result<(), ServiceError> {
    let Some(ticket) = ticket else {
        return Ok(());
    };
    let id = ticket.request_id();
    ticket
        .committed()
        .await
        .map_err(|e| ServiceError::TraceNotStored {
            request_id: id,
            cause: e.to_string(),
            cause_code: e.code(),
        })
}

/// Waits for every ticket, in order.
pub async fn all_committed(tickets: Vec<Option<Durable>>) -> Result<(), ServiceError> {
    for ticket in tickets {
        committed(ticket).await?;
    }
    Ok(())
}
