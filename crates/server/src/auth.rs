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
//! `-tokens` ([`RateLimiter::remaining`], [`write_remaining`]).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
/// The rate limit itself is protocol-free, in the application layer.
pub use glassbox_app::service::limiter::{Caller, RateLimiter, Remaining, Work, estimate_tokens};

use crate::config::{ApiKey, Config, RateLimit, Scope, sha256_hex};
use crate::error::ApiError;
use crate::metrics::Metrics;

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

/// Adds the `x-ratelimit-*` headers of what is left of a key's rate limit
/// to `response`.
pub fn write_remaining(left: &Remaining, response: &mut Response) {
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
    put("requests", left.requests);
    if let Some(t) = left.tokens {
        put("tokens", t);
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

impl Guard {
    /// `routes` behind the guard: each request authenticated, authorised
    /// for `scopes` and rate-limited before it reaches them.
    pub fn around<S: Clone + Send + Sync + 'static>(
        keys: &Arc<Keys>,
        limiter: &Arc<RateLimiter>,
        metrics: &Arc<Metrics>,
        scopes: &'static [Scope],
        routes: Router<S>,
    ) -> Router<S> {
        let guard_state = Self {
            keys: keys.clone(),
            limiter: limiter.clone(),
            metrics: metrics.clone(),
            scopes,
        };
        routes.route_layer(from_fn_with_state(guard_state, guard))
    }
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
        write_remaining(&left, &mut response);
    }
    response
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
