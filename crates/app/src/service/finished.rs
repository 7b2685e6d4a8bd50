//! A request that ran to its end: its outcome, its tokens (counted once,
//! from its spans) and the maximum run time it ran under, which turns a
//! deadline into the refusal that names where the limit is set.

use std::time::Duration;

use glassbox_engine::Outcome;
use glassbox_nodes::Registry;

use super::error::ServiceError;
use super::usage::{self, TokenUsage};

/// A maximum run time and where it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLimit {
    pub limit: Duration,
    /// `topology `rag`` or `key `nightly``.
    pub from: String,
    /// The config entry that sets it, for the hint.
    pub setting: String,
}

/// A request that ran to its end and whose trace was handed off.
#[derive(Debug)]
pub struct Finished {
    /// The result and the trace.
    pub outcome: Outcome,
    /// Its tokens, counted once from its spans.
    pub usage: TokenUsage,
    /// The maximum run time it ran under, if one applied.
    pub run_limit: Option<RunLimit>,
}

impl Finished {
    pub fn new(outcome: Outcome, kinds: &Registry, run_limit: Option<RunLimit>) -> Finished {
        let usage = usage::count(outcome.trace.spans.iter().map(|s| &**s), kinds);
        Finished {
            outcome,
            usage,
            run_limit,
        }
    }

    /// When its maximum run time ended the request:
    /// `max_run_time_exceeded`, naming the limit and where it is set.
    pub fn over_run_time(&self) -> Option<ServiceError> {
        let limit = self.run_limit.as_ref()?;
        let err = self.outcome.result.as_ref().err()?;
        if err.code() != "deadline_exceeded" {
            return None;
        }
        let id = self.outcome.trace.record.request_id;
        Some(ServiceError::MaxRunTimeExceeded {
            request_id: id,
            limit: limit.limit,
            from: limit.from.clone(),
            setting: limit.setting.clone(),
            cause: err.to_string(),
        })
    }
}
