//! The per-key rate limit: token buckets that count work, not HTTP
//! requests. A request takes one unit when it arrives (the server's guard),
//! and its door charges the rest once it knows how big the request is (an
//! embeddings call with 500 inputs, a chat with a long prompt), before any
//! work starts ([`RateLimiter::charge`]); its real tokens are settled after
//! it ends ([`RateLimiter::settle`], see [`quota`](super::quota)).
//!
//! Protocol-free: who the caller is ([`Caller`]) comes from the door that
//! authenticated it, and what is left ([`Remaining`]) is told by the door
//! in its own terms (the server: OpenAI's `x-ratelimit-*` headers).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use glassbox_trace::Priority;
use serde::{Deserialize, Serialize};

use super::error::{RateMeasure, ServiceError};

/// Who made a request (added to request extensions by the guard).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's name, or `anonymous` when no keys are configured.
    pub name: String,
    /// The key's rate limit, if it has one.
    pub limit: Option<RateLimit>,
    /// The most urgent band its requests may run in.
    pub max_priority: Option<Priority>,
    /// The longest one of its requests may run.
    pub max_run_time: Option<Duration>,
}

/// What a request costs against its key's rate limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Runs: one per request, one per embedding input.
    pub units: u64,
    /// Estimated tokens (prompt text and requested completion tokens).
    pub tokens: u64,
}

impl Work {
    /// One run and nothing else: what the guard takes for every request.
    pub const ONE: Work = Work {
        units: 1,
        tokens: 0,
    };
}

/// Rough token count of `text` before any tokenizer has seen it: about four
/// characters a token for English (the usual rule of thumb), never zero for
/// non-empty text. Used only to decide admission.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Token buckets: `burst` units of work at once, refilled at
/// `requests_per_second`; a request costs one unit per run it makes (an
/// embeddings call: one per input). With `tokens_per_minute`, a second
/// bucket of that size counts estimated tokens (see [`Work`]).
///
/// Written either as `requests_per_second` with `burst`, or as
/// `requests_per_minute` (OpenAI's RPM: the bucket holds a minute's
/// requests unless `burst` says otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RateLimitSpec")]
pub struct RateLimit {
    pub requests_per_second: f64,
    pub burst: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u64>,
}

/// [`RateLimit`] as written in the file.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitSpec {
    requests_per_second: Option<f64>,
    requests_per_minute: Option<u32>,
    burst: Option<u32>,
    tokens_per_minute: Option<u64>,
}

impl TryFrom<RateLimitSpec> for RateLimit {
    type Error = String;

    fn try_from(r: RateLimitSpec) -> Result<RateLimit, String> {
        let (requests_per_second, burst) = match (r.requests_per_second, r.requests_per_minute) {
            (Some(rps), None) => (
                rps,
                r.burst
                    .ok_or("`requests_per_second` needs `burst` (the most runs at once)")?,
            ),
            (None, Some(rpm)) => (f64::from(rpm) / 60.0, r.burst.unwrap_or(rpm)),
            (Some(_), Some(_)) => {
                return Err(
                    "set `requests_per_second` or `requests_per_minute`, not both".to_string(),
                );
            }
            (None, None) => {
                return Err("a rate limit needs `requests_per_second` (with `burst`) or `requests_per_minute`".to_string());
            }
        };
        Ok(RateLimit {
            requests_per_second,
            burst,
            tokens_per_minute: r.tokens_per_minute,
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn full(capacity: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: capacity,
            last: now,
        }
    }

    fn refill(&mut self, capacity: f64, per_second: f64, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(capacity);
        self.last = now;
    }

    /// Seconds until `cost` fits.
    fn wait_for(&self, cost: f64, per_second: f64) -> u64 {
        let wait = (cost - self.tokens) / per_second;
        wait.ceil().clamp(1.0, 86_400.0) as u64
    }
}

/// A key's buckets: units of work, and estimated tokens when configured.
#[derive(Debug, Clone, Copy)]
struct Buckets {
    units: Bucket,
    tokens: Bucket,
}

/// Why [`RateLimiter::take`] said no.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Enough will be there in this many seconds.
    Wait { secs: u64, what: Measure },
    /// The request costs more than the bucket ever holds: it can never pass.
    TooBig {
        what: Measure,
        cost: u64,
        capacity: u64,
    },
}

/// Which bucket refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    Units,
    Tokens,
}

/// Token buckets, one pair per key name.
#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, Buckets>>,
}

impl RateLimiter {
    /// Takes `work` from `who`'s buckets (both or neither), or says why not.
    pub fn take(&self, who: &str, limit: RateLimit, work: Work) -> Result<(), Refusal> {
        self.take_at(who, limit, work, work, Instant::now())
    }

    /// Takes `more` for the caller, for a request whose whole cost is
    /// `total` (the guard took part of it already), or says which limit
    /// refused it.
    pub fn charge(&self, caller: &Caller, more: Work, total: Work) -> Result<(), ServiceError> {
        let Some(limit) = caller.limit else {
            return Ok(());
        };
        self.take_at(&caller.name, limit, more, total, Instant::now())
            .map_err(|refusal| rate_limited(&caller.name, limit, total, refusal))
    }

    /// Takes `tokens` more without checking (the bucket may go into debt):
    /// for usage learnt after the work was done, so that a request whose
    /// real cost exceeded its estimate delays the key's next ones.
    pub fn settle(&self, caller: &Caller, tokens: u64) {
        let Some(limit) = caller.limit else { return };
        let Some(per_minute) = limit.tokens_per_minute else {
            return;
        };
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let capacity = per_minute as f64;
        let b = buckets
            .entry(caller.name.clone())
            .or_insert_with(|| Buckets {
                units: Bucket::full(f64::from(limit.burst.max(1)), now),
                tokens: Bucket::full(capacity, now),
            });
        b.tokens.refill(capacity, capacity / 60.0, now);
        b.tokens.tokens = (b.tokens.tokens - tokens as f64).max(-capacity);
    }

    /// What is left of `caller`'s buckets now; `None` without a limit.
    pub fn remaining(&self, caller: &Caller) -> Option<Remaining> {
        let limit = caller.limit?;
        let now = Instant::now();
        let burst = f64::from(limit.burst.max(1));
        let tpm = limit.tokens_per_minute.map(|t| t.max(1) as f64);
        let buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut units, mut tokens) = match buckets.get(&caller.name) {
            Some(b) => (b.units, b.tokens),
            None => (
                Bucket::full(burst, now),
                Bucket::full(tpm.unwrap_or(0.0), now),
            ),
        };
        drop(buckets);
        units.refill(burst, limit.requests_per_second, now);
        let left = |b: &Bucket| b.tokens.max(0.0).floor() as u64;
        let reset = |b: &Bucket, capacity: f64, per_second: f64| {
            ((capacity - b.tokens).max(0.0) / per_second).ceil() as u64
        };
        Some(Remaining {
            requests: (
                u64::from(limit.burst),
                left(&units),
                reset(&units, burst, limit.requests_per_second),
            ),
            tokens: tpm.map(|capacity| {
                tokens.refill(capacity, capacity / 60.0, now);
                (
                    capacity as u64,
                    left(&tokens),
                    reset(&tokens, capacity, capacity / 60.0),
                )
            }),
        })
    }

    /// Takes `work`; refuses for good when `total` (the request's whole
    /// cost, `work` and what was taken before) can never fit.
    fn take_at(
        &self,
        who: &str,
        limit: RateLimit,
        work: Work,
        total: Work,
        now: Instant,
    ) -> Result<(), Refusal> {
        let burst = f64::from(limit.burst.max(1));
        let tpm = limit.tokens_per_minute.map(|t| t.max(1) as f64);
        if total.units as f64 > burst {
            return Err(Refusal::TooBig {
                what: Measure::Units,
                cost: total.units,
                capacity: u64::from(limit.burst),
            });
        }
        if let Some(capacity) = tpm
            && total.tokens as f64 > capacity
        {
            return Err(Refusal::TooBig {
                what: Measure::Tokens,
                cost: total.tokens,
                capacity: capacity as u64,
            });
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let b = buckets.entry(who.to_string()).or_insert_with(|| Buckets {
            units: Bucket::full(burst, now),
            tokens: Bucket::full(tpm.unwrap_or(0.0), now),
        });
        b.units.refill(burst, limit.requests_per_second, now);
        let units = work.units as f64;
        if b.units.tokens < units {
            return Err(Refusal::Wait {
                secs: b.units.wait_for(units, limit.requests_per_second),
                what: Measure::Units,
            });
        }
        if let Some(capacity) = tpm {
            b.tokens.refill(capacity, capacity / 60.0, now);
            let tokens = work.tokens as f64;
            if b.tokens.tokens < tokens {
                return Err(Refusal::Wait {
                    secs: b.tokens.wait_for(tokens, capacity / 60.0),
                    what: Measure::Tokens,
                });
            }
            b.tokens.tokens -= tokens;
        }
        b.units.tokens -= units;
        Ok(())
    }
}

/// What is left of a key's rate limit: (limit, remaining, seconds until
/// full) for requests, and for tokens with `tokens_per_minute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remaining {
    pub requests: (u64, u64, u64),
    pub tokens: Option<(u64, u64, u64)>,
}

/// The refusal of a charge, naming the limit.
fn rate_limited(who: &str, limit: RateLimit, work: Work, refusal: Refusal) -> ServiceError {
    let measure = |what| match what {
        Measure::Units => RateMeasure::Units,
        Measure::Tokens => RateMeasure::Tokens,
    };
    match refusal {
        Refusal::Wait { secs, what } => ServiceError::RateLimited {
            key: who.to_string(),
            measure: measure(what),
            requests_per_second: limit.requests_per_second,
            burst: limit.burst,
            tokens_per_minute: limit.tokens_per_minute.unwrap_or(0),
            units: work.units,
            tokens: work.tokens,
            retry_after_s: secs,
        },
        Refusal::TooBig {
            what,
            cost,
            capacity,
        } => ServiceError::TooLargeForRateLimit {
            key: who.to_string(),
            measure: measure(what),
            cost,
            capacity,
        },
    }
}

#[cfg(test)]
#[path = "limiter_tests.rs"]
mod tests;
