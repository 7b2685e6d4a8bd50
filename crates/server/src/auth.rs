//! API keys, scopes and the per-key rate limit, as one middleware in front of
//! every protected route.
//!
//! A request carries `Authorization: Bearer KEY`; the server hashes KEY and
//! looks the hash up, so clear-text keys exist only in the client and in
//! `GLASSBOX_API_KEY`. No key: 401. A key without the route's scope: 403. A
//! key over its rate: 429 with `Retry-After`. With no key configured at all
//! the server only listens on 127.0.0.1 and every caller is `anonymous`.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::config::{ApiKey, Config, RateLimit, Scope, sha256_hex};
use crate::error::ApiError;
use crate::state::AppState;

/// Who made a request (added to request extensions by the guard).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The key's name, or `anonymous` when no keys are configured.
    pub name: String,
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
    pub fn check(
        &self,
        headers: &HeaderMap,
        scopes: &[Scope],
    ) -> Result<(Caller, Option<RateLimit>), ApiError> {
        if !self.required() {
            return Ok((
                Caller {
                    name: "anonymous".into(),
                },
                self.default_limit,
            ));
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
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
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
        Ok((
            Caller {
                name: key.name.clone(),
            },
            key.rate_limit.or(self.default_limit),
        ))
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Token buckets, one per key name.
#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// Takes one token for `who`, or says in how many seconds one will be there.
    pub fn take(&self, who: &str, limit: RateLimit) -> Result<(), u64> {
        self.take_at(who, limit, Instant::now())
    }

    fn take_at(&self, who: &str, limit: RateLimit, now: Instant) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        let burst = f64::from(limit.burst.max(1));
        let b = buckets.entry(who.to_string()).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let elapsed = now.saturating_duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * limit.requests_per_second).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - b.tokens) / limit.requests_per_second;
            Err(wait.ceil().clamp(1.0, 86_400.0) as u64)
        }
    }
}

/// The scopes a group of routes accepts (any one suffices).
#[derive(Clone)]
pub struct Guard {
    pub state: AppState,
    pub scopes: &'static [Scope],
}

/// The middleware: authenticate, authorise, rate-limit.
pub async fn guard(State(g): State<Guard>, mut req: Request, next: Next) -> Response {
    let (caller, limit) = match g.state.keys.check(req.headers(), g.scopes) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    if let Some(limit) = limit
        && let Err(secs) = g.state.limiter.take(&caller.name, limit)
    {
        g.state.metrics.rejected("-", "rate_limited");
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "key `{}` is over its rate limit of {} requests per second (burst {})",
                caller.name, limit.requests_per_second, limit.burst
            ),
        )
        .hint("retry after the number of seconds in `Retry-After`")
        .retry_after(secs)
        .into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bucket_allows_burst_then_refills() {
        let l = RateLimiter::default();
        let limit = RateLimit {
            requests_per_second: 1.0,
            burst: 2,
        };
        let t0 = Instant::now();
        assert!(l.take_at("a", limit, t0).is_ok());
        assert!(l.take_at("a", limit, t0).is_ok());
        assert_eq!(l.take_at("a", limit, t0), Err(1));
        assert!(l.take_at("b", limit, t0).is_ok(), "buckets are per key");
        assert!(l.take_at("a", limit, t0 + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn scopes_and_missing_keys() {
        let mut c = Config::default();
        c.add_env_key("k1");
        c.keys.push(ApiKey {
            name: "reader".into(),
            sha256: sha256_hex("k2"),
            scopes: vec![Scope::Read],
            rate_limit: None,
        });
        let keys = Keys::new(&c);
        let mut h = HeaderMap::new();
        assert_eq!(
            keys.check(&h, &[Scope::Run]).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        h.insert(header::AUTHORIZATION, "Bearer k2".parse().unwrap());
        assert_eq!(
            keys.check(&h, &[Scope::Run]).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(keys.check(&h, &[Scope::Read]).unwrap().0.name, "reader");
        h.insert(header::AUTHORIZATION, "Bearer k1".parse().unwrap());
        assert_eq!(keys.check(&h, &[Scope::Run]).unwrap().0.name, "env");
        h.insert(header::AUTHORIZATION, "Bearer nope".parse().unwrap());
        assert_eq!(
            keys.check(&h, &[Scope::Read]).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
    }
}
