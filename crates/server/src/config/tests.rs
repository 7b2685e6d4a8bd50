//! Tests of the config file: parsing, defaults, every problem reported.

use glassbox_trace::Priority;

use super::*;

#[test]
fn parses_keys_and_limits() {
    let c = Config::parse(&format!(
        r#"
        body_limit_bytes = 100
        [rate_limit]
        requests_per_second = 2.0
        burst = 3
        [topologies.moderation]
        max_concurrency = 1
        [[keys]]
        name = "ci"
        sha256 = "{}"
        scopes = ["read"]
        "#,
        sha256_hex("secret")
    ))
    .unwrap();
    assert_eq!(c.body_limit_bytes, 100);
    assert_eq!(c.concurrency_for("moderation"), 1);
    assert_eq!(c.concurrency_for("other"), DEFAULT_MAX_CONCURRENCY);
    assert!(c.keys[0].allows(Scope::Read));
    assert!(!c.keys[0].allows(Scope::Run));
}

#[test]
fn reports_every_problem() {
    let err = Config::parse(
        r#"
        max_concurrency = 0
        [[keys]]
        name = "a"
        sha256 = "nothex"
        scopes = []
        "#,
    )
    .unwrap_err();
    assert!(err.contains("64 hex digits"), "{err}");
    assert!(err.contains("`scopes` is empty"), "{err}");
    assert!(err.contains("`max_concurrency`"), "{err}");
}

#[test]
fn connection_limits_have_defaults_and_are_checked() {
    let c = Config::default();
    assert_eq!(c.connections.header_timeout(), Duration::from_secs(10));
    assert_eq!(c.connections.body_timeout(), Duration::from_secs(30));
    assert_eq!(c.connections.idle_timeout(), Duration::from_secs(60));
    assert_eq!(c.max_embedding_inputs, DEFAULT_MAX_EMBEDDING_INPUTS);
    let c = Config::parse("[connections]\nidle_timeout_ms = 500").unwrap();
    assert_eq!(c.connections.idle_timeout_ms, 500);
    assert_eq!(
        c.connections.header_timeout_ms, 10_000,
        "others keep defaults"
    );
    let err = Config::parse(
        "max_embedding_inputs = 0\n[connections]\nbody_timeout_ms = 0\nmax_per_client = 0",
    )
    .unwrap_err();
    assert!(err.contains("`body_timeout_ms`"), "{err}");
    assert!(err.contains("`max_per_client`"), "{err}");
    assert!(err.contains("`max_embedding_inputs`"), "{err}");
}

#[test]
fn traces_are_durable_unless_opted_out() {
    assert_eq!(Config::default().store.durability, Durability::Commit);
    let c = Config::parse("[store]\ndurability = \"async\"").unwrap();
    assert_eq!(c.store.durability, Durability::Async);
    let err = Config::parse("[store]\ndurability = \"later\"").unwrap_err();
    assert!(err.contains("commit") && err.contains("async"), "{err}");
}

#[test]
fn rate_limits_take_requests_per_minute_and_keys_take_priorities_and_run_times() {
    let c = Config::parse(&format!(
        r#"
        max_queue = 4
        [rate_limit]
        requests_per_minute = 120
        tokens_per_minute = 1000
        [topologies.rag]
        max_queue = 2
        max_run_time = "300ms"
        [[keys]]
        name = "nightly"
        sha256 = "{}"
        scopes = ["run"]
        max_priority = "batch"
        max_run_time = "5m"
        rate_limit = {{ requests_per_minute = 6, burst = 2 }}
        "#,
        sha256_hex("k")
    ))
    .unwrap();
    let r = c.rate_limit.unwrap();
    assert_eq!(
        (r.requests_per_second, r.burst, r.tokens_per_minute),
        (2.0, 120, Some(1000))
    );
    let k = &c.keys[0];
    assert_eq!(
        k.rate_limit.map(|r| (r.requests_per_second, r.burst)),
        Some((0.1, 2))
    );
    assert_eq!(k.max_priority, Some(Priority::Offline));
    assert_eq!(k.max_run_time, Some(Duration::from_secs(300)));
    assert_eq!((c.queue_for("rag"), c.queue_for("other")), (2, 4));
    assert_eq!(c.run_time_for("rag"), Some(Duration::from_millis(300)));
    assert_eq!(c.run_time_for("other"), None);
    assert_eq!(c.priorities.max_passed_over, DEFAULT_MAX_PASSED_OVER);
    assert_eq!(Config::default().max_queue, 0, "no queue unless configured");

    let err = Config::parse(
        "[rate_limit]
requests_per_second = 1.0
requests_per_minute = 60",
    )
    .unwrap_err();
    assert!(err.contains("not both"), "{err}");
    let err = Config::parse(
        "[rate_limit]
requests_per_second = 1.0",
    )
    .unwrap_err();
    assert!(err.contains("`burst`"), "{err}");
    let err = Config::parse(
        "[priorities]
max_passed_over = 0
[topologies.a]
max_run_time = \"soon\"",
    )
    .unwrap_err();
    assert!(err.contains("topologies.a: `max_run_time`"), "{err}");
    assert!(err.contains("`max_passed_over`"), "{err}");
}

#[test]
fn rejects_unknown_fields() {
    assert!(Config::parse("prot = 1").unwrap_err().contains("prot"));
}

#[test]
fn hashes_like_sha256sum() {
    assert_eq!(
        sha256_hex("test"),
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    );
}
