//! API keys, scopes and the per-key rate limit, as one middleware in front of
//! every protected route.
//!
//! A request carries `Authorization: Bearer KEY` (the scheme in any case,
//! RFC 7235); the server hashes KEY and looks the hash up, so clear-text keys
//! exist only in the client and in `GLASSBOX_API_KEY`. No key: 401. A key
//! without the route's scope: 403. A key over its rate: 429 with
//! `Retry-After`. With no key configured at all the server only listens on
//! 127.0.0.1 and every caller is `anonymous` (see [`crate::keyless`]).
//!
//! Rate limits count work, not HTTP requests: the guard takes one unit when a
//! request arrives, and a handler that learns from the body that the request
//! is bigger (an embeddings call with 500 inputs, a chat with a long prompt)
//! charges the rest with [`RateLimiter::charge`] before any work starts.
//!
//! Every answer to a key with a rate limit carries what is left of it, as
//! OpenAI sends it: `x-ratelimit-limit-requests`,
//! `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` (until the
//! bucket is full again) and, with `tokens_per_minute`, the same three for
//! `-tokens` ([`RateLimiter::remaining`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use glassbox_trace::Priority;

use crate::config::{ApiKey, Config, RateLimit, Scope, sha256_hex};
use glassbox_app::ServiceError;
use glassbox_app::service::RateMeasure;

use crate::error::ApiError;
use crate::metrics::Metrics;

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

/// The accepted keys, by hash.
#[derive(Debug)]
pub struct Keys {
    by_hash: HashMap<String, ApiKey>,
    default_limit: Option<RateLimit>,
}

impl Keys {
    pub fn new(config: &Config) -> Keys {
        Keys {
            by_hash: config
                .keys
                .iter()
                .map(|k| (k.sha256.clone(), k.clone()))
                .collect(),
            default_limit: config.rate_limit,
        }
    }

    pub fn required(&self) -> bool {
        !self.by_hash.is_empty()
    }

    /// The caller, if the request may use a route that needs one of `scopes`.
    pub fn check(&self, headers: &HeaderMap, scopes: &[Scope]) -> Result<Caller, ApiError> {
        if !self.required() {
            return Ok(Caller {
                name: "anonymous".into(),
                limit: self.default_limit,
                max_priority: None,
                max_run_time: None,
            });
        }
        let unauthorized = |message: &str| {
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
                .hint("send `Authorization: Bearer YOUR_KEY`")
        };
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(unauthorized("this endpoint needs an API key"));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(bearer_token)
            .ok_or_else(|| unauthorized("the `Authorization` header is not `Bearer KEY`"))?;
        let key = self
            .by_hash
            .get(&sha256_hex(token))
            .ok_or_else(|| unauthorized("the API key is not valid"))?;
        if !scopes.iter().any(|s| key.allows(*s)) {
            let wanted: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "key `{}` lacks the scope this endpoint needs (one of: {})",
                    key.name,
                    wanted.join(", ")
                ),
            )
            .hint("use a key with that scope, or add it to the key in the config file"));
        }
        Ok(Caller {
            name: key.name.clone(),
            limit: key.rate_limit.or(self.default_limit),
            max_priority: key.max_priority,
            max_run_time: key.max_run_time,
        })
    }
}

/// The credentials of `Bearer TOKEN`; the scheme is case-insensitive
/// (RFC 7235 section 2.1), so `bearer` and `BEARER` work too.
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_start();
    let (scheme, rest) = value.split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
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

impl Remaining {
    /// Adds the `x-ratelimit-*` headers to `response`.
    pub fn write(&self, response: &mut Response) {
        let h = response.headers_mut();
        let mut put = |what: &str, (limit, left, reset): (u64, u64, u64)| {
            for (name, value) in [
                (format!("x-ratelimit-limit-{what}"), limit.to_string()),
                (format!("x-ratelimit-remaining-{what}"), left.to_string()),
                (format!("x-ratelimit-reset-{what}"), format!("{reset}s")),
            ] {
                if let (Ok(n), Ok(v)) = (
                    axum::http::HeaderName::try_from(name),
                    axum::http::HeaderValue::try_from(value),
                ) {
                    h.insert(n, v);
                }
            }
        };
        put("requests", self.requests);
        if let Some(t) = self.tokens {
            put("tokens", t);
        }
    }
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

/// The scopes a group of routes accepts (any one suffices).
#[derive(Clone)]
pub struct Guard {
    pub keys: Arc<Keys>,
    pub limiter: Arc<RateLimiter>,
    /// Where refusals are counted.
    pub metrics: Arc<Metrics>,
    pub scopes: &'static [Scope],
}

/// The middleware: authenticate, authorise, rate-limit.
pub async fn guard(State(g): State<Guard>, mut req: Request, next: Next) -> Response {
    let caller = match g.keys.check(req.headers(), g.scopes) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let limiter = g.limiter.clone();
    let charged = limiter
        .charge(&caller, Work::ONE, Work::ONE)
        .inspect_err(|e| g.metrics.rejected("-", e.code()));
    let mut response = match charged {
        Err(e) => ApiError::from(e).into_response(),
        Ok(()) => {
            req.extensions_mut().insert(caller.clone());
            next.run(req).await
        }
    };
    // Read after the handler charged and settled the request's tokens.
    if let Some(left) = limiter.remaining(&caller) {
        left.write(&mut response);
    }
    response
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
