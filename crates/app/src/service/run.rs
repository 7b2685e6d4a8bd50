//! Running admitted requests to their end: one request, or a batch of
//! inputs under one admission (an embeddings call). Both run on the engine
//! runtime and return once the traces have been handed off.

use glassbox_engine::{CancellationToken, Outcome, RunOptions};
use glassbox_trace::RequestId;
use serde_json::Value;

use super::ServiceError;
use super::durable::{all_committed, committed};
use super::{Admission, Finished, TokenUsage};

impl Admission {
    /// Runs the request on the engine runtime, holding the admission (slot
    /// and in-flight count) until it ends, while the caller waits without
    /// occupying an HTTP worker. Requests that arrive meanwhile reach
    /// [`Service::admit`](super::Service::admit) and wait or get 429 once
    /// the topology is full, even when its nodes are pure CPU and never
    /// yield. Its maximum run time, if one applies, is the run's deadline:
    /// past it the run is cancelled (model work included) and its trace
    /// recorded.
    /// Dropping the returned future (the client went away) cancels the run.
    ///
    /// Returns once the request's trace has committed (see
    /// [`Service::ticket`](super::Service::ticket)), so the answer built
    /// from it never names a trace a crash could still lose; a trace that
    /// cannot be stored is an error (`TraceNotStored`) instead of an answer.
    pub async fn run(
        mut self,
        input: Value,
        mut options: RunOptions,
    ) -> Result<Finished, ServiceError> {
        let service = self.service.clone();
        let charge = self.take_charge();
        let id = *options.request_id.get_or_insert_with(RequestId::new);
        let ticket = service.ticket(id);
        let cancel = options
            .cancel
            .get_or_insert_with(CancellationToken::new)
            .clone();
        let _cancel_on_drop = cancel.drop_guard();
        self.prepare(&mut options);
        let run_limit = self.run_limit.clone();
        let pipeline = self.served.pipeline.clone();
        let outcome = service
            .engine
            .run(async move {
                let outcome = pipeline.run(input, options).await;
                drop(self);
                outcome
            })
            .await;
        let finished = Finished::new(outcome, service.catalog.registry(), run_limit);
        if let Some(charge) = charge {
            charge.settle(&finished.usage);
        }
        committed(ticket).await?;
        Ok(finished)
    }

    /// Runs `inputs` one after another on the engine runtime under this one
    /// admission, each as a request of its own with its own trace, and stops
    /// after the first outcome for which `last` holds (a failure the caller
    /// answers with). Dropping the returned future cancels the batch.
    ///
    /// Returns the requests that ran, in order, once all their traces have
    /// committed (the inputs' traces are queued one after another, so they
    /// mostly share one commit).
    pub async fn run_each(
        mut self,
        inputs: Vec<Value>,
        last: fn(&Outcome) -> bool,
    ) -> Result<Vec<Finished>, ServiceError> {
        let service = self.service.clone();
        let charge = self.take_charge();
        let cancel = CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let pipeline = self.served.pipeline.clone();
        let run_limit = self.run_limit.clone();
        let (outcomes, tickets) = service
            .engine
            .run(async move {
                let mut outcomes = Vec::with_capacity(inputs.len());
                let mut tickets = Vec::with_capacity(inputs.len());
                for input in inputs {
                    if cancel.is_cancelled() {
                        break;
                    }
                    let rid = RequestId::new();
                    tickets.push(self.service.ticket(rid));
                    let mut options = RunOptions {
                        request_id: Some(rid),
                        cancel: Some(cancel.clone()),
                        ..RunOptions::default()
                    };
                    self.prepare(&mut options);
                    let outcome = pipeline.run(input, options).await;
                    let stop = last(&outcome);
                    outcomes.push(outcome);
                    if stop {
                        break;
                    }
                }
                drop(self);
                (outcomes, tickets)
            })
            .await;
        let kinds = service.catalog.registry();
        let finished: Vec<Finished> = outcomes
            .into_iter()
            .map(|o| Finished::new(o, kinds, run_limit.clone()))
            .collect();
        if let Some(charge) = charge {
            charge.settle(&TokenUsage::sum(finished.iter().map(|f| &f.usage)));
        }
        all_committed(tickets).await?;
        Ok(finished)
    }
}
