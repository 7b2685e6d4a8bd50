//! Tests of the per-key rate limit.

use super::*;

fn at(
    l: &RateLimiter,
    who: &str,
    limit: RateLimit,
    work: Work,
    now: Instant,
) -> Result<(), Refusal> {
    l.take_at(who, limit, work, work, now)
}

#[test]
fn bucket_allows_burst_then_refills() {
    let l = RateLimiter::default();
    let limit = RateLimit {
        requests_per_second: 1.0,
        burst: 2,
        tokens_per_minute: None,
    };
    let t0 = Instant::now();
    let one = Work::ONE;
    assert!(at(&l, "a", limit, one, t0).is_ok());
    assert!(at(&l, "a", limit, one, t0).is_ok());
    let wait = Refusal::Wait {
        secs: 1,
        what: Measure::Units,
    };
    assert_eq!(at(&l, "a", limit, one, t0), Err(wait));
    assert!(at(&l, "b", limit, one, t0).is_ok(), "buckets are per key");
    assert!(at(&l, "a", limit, one, t0 + Duration::from_secs(1)).is_ok());
}

#[test]
fn work_counts_units_and_tokens_all_or_nothing() {
    let l = RateLimiter::default();
    let limit = RateLimit {
        requests_per_second: 1.0,
        burst: 10,
        tokens_per_minute: Some(600),
    };
    let t0 = Instant::now();
    let work = |units, tokens| Work { units, tokens };
    assert!(at(&l, "a", limit, work(8, 100), t0).is_ok());
    // 3 more units do not fit (2 left): nothing is taken.
    assert_eq!(
        at(&l, "a", limit, work(3, 10), t0),
        Err(Refusal::Wait {
            secs: 1,
            what: Measure::Units
        })
    );
    // 600 tokens per minute refill at 10 per second; 500 left.
    assert_eq!(
        at(&l, "a", limit, work(1, 520), t0),
        Err(Refusal::Wait {
            secs: 2,
            what: Measure::Tokens
        })
    );
    assert!(at(&l, "a", limit, work(2, 500), t0).is_ok());
    assert!(matches!(
        at(&l, "b", limit, work(11, 0), t0),
        Err(Refusal::TooBig {
            cost: 11,
            capacity: 10,
            ..
        })
    ));
    assert!(matches!(
        at(&l, "b", limit, work(1, 601), t0),
        Err(Refusal::TooBig {
            what: Measure::Tokens,
            ..
        })
    ));
}

#[test]
fn remaining_counts_down_what_the_buckets_hold() {
    let l = RateLimiter::default();
    let caller = Caller {
        name: "k".into(),
        limit: Some(RateLimit {
            requests_per_second: 1.0,
            burst: 3,
            tokens_per_minute: Some(600),
        }),
        max_priority: None,
        max_run_time: None,
    };
    let fresh = l.remaining(&caller).unwrap();
    assert_eq!(fresh.requests, (3, 3, 0));
    assert_eq!(fresh.tokens, Some((600, 600, 0)));
    l.charge(
        &caller,
        Work {
            units: 2,
            tokens: 100,
        },
        Work {
            units: 2,
            tokens: 100,
        },
    )
    .unwrap();
    let left = l.remaining(&caller).unwrap();
    assert_eq!((left.requests.0, left.requests.1), (3, 1));
    // 2 units at 1 a second, 100 tokens at 10 a second: full again in 2 s and 10 s.
    assert!((1..=2).contains(&left.requests.2), "{left:?}");
    assert_eq!(left.tokens.map(|t| t.1), Some(500));
    assert!(
        left.tokens.is_some_and(|t| (9..=10).contains(&t.2)),
        "{left:?}"
    );
    let none = Caller {
        limit: None,
        ..caller
    };
    assert_eq!(l.remaining(&none), None);
}

#[test]
fn estimates_about_four_characters_a_token() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("hi"), 1);
    assert_eq!(estimate_tokens("hello world!"), 3);
}
