//! A request that ran to its end: its outcome, its tokens (counted once,
//! from its spans) and the maximum run time it ran under, which turns a
//! deadline into the 504 that names where the limit is set.

use axum::http::StatusCode;
use glassbox_engine::{Outcome, Registry};

use super::admission::RunLimit;
use super::usage::{self, TokenUsage};
use crate::error::ApiError;

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
    pub(super) fn new(outcome: Outcome, kinds: &Registry, run_limit: Option<RunLimit>) -> Finished {
        let usage = usage::count(outcome.trace.spans.iter().map(|s| &**s), kinds);
        Finished {
            outcome,
            usage,
            run_limit,
        }
    }

    /// When its maximum run time ended the request: 504
    /// `max_run_time_exceeded`, naming the limit and where it is set.
    pub fn over_run_time(&self) -> Option<ApiError> {
        let limit = self.run_limit.as_ref()?;
        let err = self.outcome.result.as_ref().err()?;
        if err.code() != "deadline_exceeded" {
            return None;
        }
        let id = self.outcome.trace.record.request_id;
        Some(
            ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "max_run_time_exceeded",
                format!(
                    "request {id} ran past its maximum run time of {} ms, set for {}, and was cancelled ({err}; GET /v1/traces/{id} shows its path)",
                    limit.limit.as_millis(),
                    limit.from
                ),
            )
            .hint(format!(
                "raise {} in the server config, or make the request lighter",
                limit.setting
            )),
        )
    }
}
