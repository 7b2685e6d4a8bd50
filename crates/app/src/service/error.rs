//! Why the request service turned a request away or withheld its answer:
//! [`ServiceError`], in domain terms only. Each door says what it means in
//! its protocol (the server: one module maps every variant to a status,
//! `glassbox_server::error`); the service itself knows no status codes.
//!
//! A run that ran and failed is not a `ServiceError`: it is an outcome
//! with its trace (the engine's `ExecError`), answered with its path and
//! receipt.

use std::time::Duration;

use glassbox_trace::{Priority, RequestId};

/// Which of a key's buckets refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateMeasure {
    /// Runs: `requests_per_second` with its `burst`.
    Units,
    /// Tokens: `tokens_per_minute`.
    Tokens,
}

/// A refusal of the request service (see the module docs).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ServiceError {
    /// No topology of that id is served.
    #[error("no topology `{id}` is served")]
    NotServed {
        id: String,
        /// The closest served id, if one is close.
        closest: Option<String>,
        /// Every served id.
        served: Vec<String>,
    },
    /// Every slot of the topology is busy, and its queue (if it has one)
    /// is full of requests of this band or more urgent ones.
    #[error("{}", overloaded_message(.topology, *.slots, .queue))]
    Overloaded {
        topology: String,
        slots: usize,
        /// The queue's length and the band that found it full.
        queue: Option<(usize, Priority)>,
    },
    /// The request waited in a full queue and gave its place to a more
    /// urgent one.
    #[error(
        "this {band} request waited in topology `{topology}`'s full queue (of {queue}) and was shed to make room for an {by} request: the least urgent band is shed first under overload"
    )]
    Shed {
        topology: String,
        band: Priority,
        by: Priority,
        queue: usize,
    },
    /// The caller's key is over its rate limit for now.
    #[error("{}", rate_message(.key, *.measure, *.requests_per_second, *.burst, *.tokens_per_minute, *.units, *.tokens))]
    RateLimited {
        key: String,
        measure: RateMeasure,
        requests_per_second: f64,
        burst: u32,
        tokens_per_minute: u64,
        /// What the request counts.
        units: u64,
        tokens: u64,
        /// When enough will be there.
        retry_after_s: u64,
    },
    /// The request costs more than the key's bucket ever holds.
    #[error(
        "this request counts {cost} {}, more than key `{key}`'s rate limit ever allows at once ({} = {capacity})",
        unit_of(*.measure), setting_of(*.measure)
    )]
    TooLargeForRateLimit {
        key: String,
        measure: RateMeasure,
        cost: u64,
        capacity: u64,
    },
    /// The priority asked for is not a band.
    #[error("{what}: {reason}")]
    BadPriority { what: String, reason: String },
    /// The request ran, but its trace could not be stored, so its answer
    /// is withheld (durability `commit`).
    #[error(
        "request {request_id} ran, but its trace could not be stored, so its answer is withheld: {cause} [{cause_code}]"
    )]
    TraceNotStored {
        request_id: RequestId,
        cause: String,
        cause_code: &'static str,
    },
    /// Its maximum run time ended the request.
    #[error(
        "request {request_id} ran past its maximum run time of {} ms, set for {from}, and was cancelled ({cause}; GET /v1/traces/{request_id} shows its path)",
        .limit.as_millis()
    )]
    MaxRunTimeExceeded {
        request_id: RequestId,
        limit: Duration,
        /// `topology `rag`` or `key `nightly``.
        from: String,
        /// The config entry that sets it.
        setting: String,
        /// The engine's error.
        cause: String,
    },
    /// A worker's engines would make the call wait longer than it may.
    #[error(
        "this worker cannot start the call within {} ms: {waiting} calls wait ahead of it, about {} ms",
        .within.as_millis(), .wait.as_millis()
    )]
    CannotStartInTime {
        within: Duration,
        waiting: usize,
        wait: Duration,
    },
}

fn overloaded_message(topology: &str, slots: usize, queue: &Option<(usize, Priority)>) -> String {
    match queue {
        None => {
            format!("topology `{topology}` is running its limit of {slots} concurrent requests")
        }
        Some((queue, band)) => format!(
            "topology `{topology}` is running its limit of {slots} concurrent requests and its queue of {queue} is full of requests of the {band} band or more urgent ones"
        ),
    }
}

fn rate_message(
    key: &str,
    measure: RateMeasure,
    requests_per_second: f64,
    burst: u32,
    tokens_per_minute: u64,
    units: u64,
    tokens: u64,
) -> String {
    match measure {
        RateMeasure::Units => format!(
            "key `{key}` is over its rate limit of {requests_per_second} requests per second (burst {burst}); \
             this request counts {units} (one per run, one per embedding input)"
        ),
        RateMeasure::Tokens => format!(
            "key `{key}` is over its limit of {tokens_per_minute} tokens per minute; \
             this request counts about {tokens} tokens"
        ),
    }
}

fn unit_of(measure: RateMeasure) -> &'static str {
    match measure {
        RateMeasure::Units => "runs",
        RateMeasure::Tokens => "tokens",
    }
}

fn setting_of(measure: RateMeasure) -> &'static str {
    match measure {
        RateMeasure::Units => "`burst`",
        RateMeasure::Tokens => "`tokens_per_minute`",
    }
}

impl ServiceError {
    /// Stable machine code (API JSON, metrics labels).
    pub fn code(&self) -> &'static str {
        match self {
            ServiceError::NotServed { .. } => "topology_not_found",
            ServiceError::Overloaded { .. } => "overloaded",
            ServiceError::Shed { .. } => "shed",
            ServiceError::RateLimited { .. } => "rate_limited",
            ServiceError::TooLargeForRateLimit { .. } => "request_too_large_for_rate_limit",
            ServiceError::BadPriority { .. } => "bad_priority",
            ServiceError::TraceNotStored { .. } => "trace_not_stored",
            ServiceError::MaxRunTimeExceeded { .. } => "max_run_time_exceeded",
            ServiceError::CannotStartInTime { .. } => "cannot_start_in_time",
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            ServiceError::NotServed {
                closest, served, ..
            } => match closest {
                Some(c) => format!("did you mean `{c}`? (GET /v1/topologies lists them)"),
                None if served.is_empty() => {
                    "no topology is served: check the server log for invalid files".into()
                }
                None => format!("served: {}", served.join(", ")),
            },
            ServiceError::Overloaded { queue: None, .. } => "retry after the number of seconds in `Retry-After`, or raise `max_concurrency` for this topology".into(),
            ServiceError::Overloaded { queue: Some(_), .. } => "retry after the number of seconds in `Retry-After`, or raise `max_concurrency` / `max_queue` for this topology".into(),
            ServiceError::Shed { .. } => "retry after the number of seconds in `Retry-After`, send fewer requests at once, or use a more urgent band if the work cannot wait".into(),
            ServiceError::RateLimited { .. } => {
                "retry after the number of seconds in `Retry-After`".into()
            }
            ServiceError::TooLargeForRateLimit {
                measure, capacity, ..
            } => format!(
                "split it into requests of at most {capacity} {}, or raise {} in the server config",
                unit_of(*measure),
                setting_of(*measure)
            ),
            ServiceError::BadPriority { .. } => {
                "use interactive, online (the default), offline or batch".into()
            }
            ServiceError::TraceNotStored { .. } => "the trace store is failing or the server is stopping: check the server log (`glassbox doctor` checks the store), then retry".into(),
            ServiceError::MaxRunTimeExceeded { setting, .. } => format!(
                "raise {setting} in the server config, or make the request lighter"
            ),
            ServiceError::CannotStartInTime { .. } => {
                "another worker may start it sooner; retry after the seconds in `Retry-After`"
                    .into()
            }
        })
    }

    /// Seconds after which a retry may succeed, where waiting helps.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ServiceError::Overloaded { .. }
            | ServiceError::Shed { .. }
            | ServiceError::TraceNotStored { .. } => Some(1),
            ServiceError::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            ServiceError::CannotStartInTime { wait, .. } => Some(wait.as_secs()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_names_the_band_and_the_queue() {
        let e = ServiceError::Overloaded {
            topology: "rag".into(),
            slots: 2,
            queue: Some((8, Priority::Offline)),
        };
        assert_eq!(e.code(), "overloaded");
        let text = e.to_string();
        assert!(
            text.contains("limit of 2") && text.contains("queue of 8"),
            "{text}"
        );
        assert!(e.hint().is_some_and(|h| h.contains("max_queue")));
        assert_eq!(e.retry_after(), Some(1));
    }

    #[test]
    fn an_unknown_topology_suggests_the_closest_one() {
        let e = ServiceError::NotServed {
            id: "rga".into(),
            closest: Some("rag".into()),
            served: vec!["rag".into()],
        };
        assert_eq!(e.to_string(), "no topology `rga` is served");
        assert!(e.hint().is_some_and(|h| h.contains("`rag`")));
        assert_eq!(e.retry_after(), None);
    }
}
