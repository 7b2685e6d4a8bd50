//! Retries, timeouts, fallbacks, deadlines, cancellation and re-runs.

use std::time::Duration;

use glassbox_engine::trace::{RequestStatus, SpanRole, SpanStatus};
use glassbox_engine::{CancellationToken, ExecError, RunOptions};
use serde_json::json;

use crate::support::{pipeline, run_once, status};

#[tokio::test(start_paused = true)]
async fn retries_then_success() {
    let (p, _sink) = pipeline(
        r#"
topology_id: retry
version: "1"
nodes:
  - { id: flaky, type: test, retries: 3, backoff_ms: 100, config: { fail_times: 2, value: ok } }
"#,
    );
    let before = tokio::time::Instant::now();
    let out = p.run(json!({}), RunOptions::default()).await;
    assert_eq!(out.result.unwrap(), json!("ok"));
    let spans = &out.trace.spans;
    assert_eq!(
        spans
            .iter()
            .map(|s| (s.attempt, s.status))
            .collect::<Vec<_>>(),
        vec![
            (1, SpanStatus::Error),
            (2, SpanStatus::Error),
            (3, SpanStatus::Ok)
        ]
    );
    assert_eq!(spans[0].error.as_ref().unwrap().code, "unavailable");
    // Backoff with equal jitter: 50..=100 ms, then 100..=200 ms.
    let waited = before.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited <= Duration::from_millis(300),
        "{waited:?}"
    );
    let r = &out.trace.record;
    assert_eq!(r.path.node("flaky").unwrap().attempts, 3);
    assert!(
        r.explanation.text.contains("`flaky` needed 3 attempts"),
        "{}",
        r.explanation.text
    );
}

#[tokio::test(start_paused = true)]
async fn retries_exhausted_then_fallback() {
    let out = run_once(
        r#"
topology_id: fallback
version: "1"
nodes:
  - { id: route, type: test }
  - { id: llm, type: test, retries: 1, backoff_ms: 10, fallback: llm_small, config: { fail_times: 5 } }
  - { id: llm_small, type: test, config: { value: small answer, label: ok } }
  - { id: guard, type: test, config: { value: checked } }
edges:
  - { from: route, to: llm }
  - { from: llm, to: guard, condition: ok }
"#,
    ).await;
    assert_eq!(out.result.unwrap(), json!("checked"));
    let r = &out.trace.record;
    assert!(r.degraded);
    assert_eq!(r.status, RequestStatus::Ok);
    assert_eq!(status(r, "llm"), "fell_back");
    assert_eq!(
        r.path.node("llm").unwrap().fallback.as_deref(),
        Some("llm_small")
    );
    assert_eq!(status(r, "llm_small"), "succeeded");
    assert_eq!(
        r.path.node("llm_small").unwrap().replaces.as_deref(),
        Some("llm")
    );
    // The fallback's label stands in for the failed node's.
    let e = r.path.edge("llm", "guard").unwrap();
    assert!(e.taken);
    assert_eq!(
        e.why,
        "label ok emitted by llm (via fallback llm_small) (rule rule_ok)"
    );
    let roles: Vec<_> = out
        .trace
        .spans
        .iter()
        .map(|s| (s.node.to_string(), s.attempt, s.role.clone()))
        .collect();
    assert_eq!(
        roles[1..4],
        [
            ("llm".to_string(), 1, SpanRole::Primary),
            ("llm".to_string(), 2, SpanRole::Primary),
            (
                "llm_small".to_string(),
                1,
                SpanRole::Fallback {
                    replaces: "llm".into()
                }
            ),
        ]
    );
    assert!(
        r.explanation
            .text
            .contains("its fallback `llm_small` stood in"),
        "{}",
        r.explanation.text
    );
}

#[tokio::test(start_paused = true)]
async fn timeout_then_fallback() {
    let (p, _sink) = pipeline(
        r#"
topology_id: timeout
version: "1"
nodes:
  - { id: slow, type: test, timeout_ms: 50, fallback: quick, config: { hang: true } }
  - { id: quick, type: test, config: { value: degraded } }
"#,
    );
    let before = tokio::time::Instant::now();
    let out = p.run(json!({}), RunOptions::default()).await;
    assert_eq!(out.result.unwrap(), json!("degraded"));
    assert_eq!(before.elapsed(), Duration::from_millis(50));
    let s = &out.trace.spans[0];
    assert_eq!((s.node.as_ref(), s.status), ("slow", SpanStatus::Timeout));
    assert_eq!(s.error.as_ref().unwrap().code, "timeout");
    assert_eq!(status(&out.trace.record, "slow"), "fell_back");
}

#[tokio::test(start_paused = true)]
async fn failure_names_node_attempt_and_cause_and_keeps_the_trace() {
    let (p, sink) = pipeline(
        r#"
topology_id: fail
version: "1"
nodes:
  - { id: a, type: test }
  - { id: b, type: test, retries: 2, backoff_ms: 1, config: { fail_times: 9 } }
  - { id: c, type: test, config: { sleep_ms: 1000 } }
  - { id: d, type: test }
edges:
  - { from: a, to: b }
  - { from: a, to: c }
  - { from: b, to: d }
"#,
    );
    let out = p.run(json!({}), RunOptions::default()).await;
    let err = out.result.unwrap_err();
    assert_eq!(err.code(), "node_failed");
    assert_eq!(err.node(), Some("b"));
    assert_eq!(err.attempt(), Some(3));
    assert_eq!(
        err.to_string(),
        "node `b` failed on attempt 3: unavailable: flaky dependency (attempt 3)"
    );
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Failed);
    assert_eq!(r.error.as_ref().unwrap().node.as_deref(), Some("b"));
    assert_eq!(status(r, "b"), "failed");
    assert_eq!(status(r, "c"), "cancelled");
    assert_eq!(status(r, "d"), "not_run");
    assert_eq!(r.path.edge("b", "d").unwrap().why, "source failed");
    // c's in-flight attempt is a span too.
    let c = out.trace.spans.iter().find(|s| &*s.node == "c").unwrap();
    assert_eq!(c.status, SpanStatus::Cancelled);
    assert_eq!(
        sink.record(r.request_id).unwrap().status,
        RequestStatus::Failed
    );
    assert_eq!(sink.spans_of(r.request_id).len(), 5);
    assert!(
        r.explanation
            .text
            .contains("The request failed: node `b` failed on attempt 3")
    );
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_not_retried() {
    let out = run_once(
        r#"
topology_id: bad
version: "1"
nodes:
  - { id: a, type: test, retries: 3, config: { bad_input: true } }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap_err().attempt(), Some(1));
    assert_eq!(out.trace.spans.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn deadline_exceeded() {
    let (p, _sink) = pipeline(
        r#"
topology_id: deadline
version: "1"
defaults: { deadline_ms: 200 }
nodes:
  - { id: a, type: test }
  - { id: slow, type: test, config: { sleep_ms: 5000 } }
edges:
  - { from: a, to: slow }
"#,
    );
    let before = tokio::time::Instant::now();
    let out = p.run(json!({}), RunOptions::default()).await;
    assert_eq!(before.elapsed(), Duration::from_millis(200));
    let err = out.result.unwrap_err();
    assert!(matches!(err, ExecError::DeadlineExceeded { .. }));
    assert_eq!(
        err.to_string(),
        "request deadline of 200 ms exceeded while `slow` (attempt 1) ran"
    );
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Failed);
    assert_eq!(r.error.as_ref().unwrap().code, "deadline_exceeded");
    let s = out.trace.spans.iter().find(|s| &*s.node == "slow").unwrap();
    assert_eq!(s.status, SpanStatus::Timeout);

    // A per-call override wins over the topology's deadline.
    let opts = RunOptions {
        deadline: Some(Duration::from_millis(20)),
        ..RunOptions::default()
    };
    let before = tokio::time::Instant::now();
    let out = p.run(json!({}), opts).await;
    assert_eq!(before.elapsed(), Duration::from_millis(20));
    assert!(out.result.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_deadline_names_the_retry_it_cut_short() {
    // Attempt 1 fails at 100 ms, attempt 2 starts by 110 ms and would end
    // by 210 ms: the 150 ms deadline cuts attempt 2.
    let out = run_once(
        r#"
topology_id: deadline_retry
version: "1"
defaults: { deadline_ms: 150 }
nodes:
  - { id: flaky, type: test, retries: 2, backoff_ms: 10, config: { fail_times: 1, sleep_ms: 100 } }
"#,
    )
    .await;
    let err = out.result.unwrap_err();
    assert_eq!(err.node(), Some("flaky"));
    assert_eq!(err.attempt(), Some(2));
    let statuses: Vec<_> = out
        .trace
        .spans
        .iter()
        .map(|s| (s.attempt, s.status))
        .collect();
    assert_eq!(
        statuses,
        vec![(1, SpanStatus::Error), (2, SpanStatus::Timeout)]
    );
    let r = &out.trace.record;
    assert_eq!(r.error.as_ref().unwrap().node.as_deref(), Some("flaky"));
    assert_eq!(r.error.as_ref().unwrap().attempt, Some(2));
}

#[tokio::test(start_paused = true)]
async fn a_deadline_names_the_fallback_it_cut_short() {
    let out = run_once(
        r#"
topology_id: deadline_fallback
version: "1"
defaults: { deadline_ms: 100 }
nodes:
  - { id: llm, type: test, fallback: llm_small, config: { fail_times: 5 } }
  - { id: llm_small, type: test, config: { sleep_ms: 5000 } }
"#,
    )
    .await;
    let err = out.result.unwrap_err();
    assert_eq!(
        err.to_string(),
        "request deadline of 100 ms exceeded while `llm_small` (attempt 1) ran"
    );
    let r = &out.trace.record;
    assert_eq!(status(r, "llm"), "cancelled");
}

#[tokio::test(start_paused = true)]
async fn cancellation_by_token_still_finalises_the_trace() {
    let (p, sink) = pipeline(
        r#"
topology_id: cancel
version: "1"
nodes:
  - { id: a, type: test }
  - { id: slow, type: test, config: { sleep_ms: 5000 } }
edges:
  - { from: a, to: slow }
"#,
    );
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        t.cancel();
    });
    let opts = RunOptions {
        cancel: Some(token),
        ..RunOptions::default()
    };
    let out = p.run(json!({}), opts).await;
    assert!(matches!(out.result, Err(ExecError::Cancelled)));
    let r = &out.trace.record;
    assert_eq!(r.status, RequestStatus::Cancelled);
    assert_eq!(status(r, "a"), "succeeded");
    assert_eq!(status(r, "slow"), "cancelled");
    assert_eq!(
        sink.record(r.request_id).unwrap().status,
        RequestStatus::Cancelled
    );
    assert_eq!(sink.spans_of(r.request_id).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_cancels_and_records() {
    let (p, sink) = pipeline(
        r#"
topology_id: drop
version: "1"
nodes:
  - { id: a, type: test }
  - { id: slow, type: test, config: { sleep_ms: 5000 } }
edges:
  - { from: a, to: slow }
"#,
    );
    let res = tokio::time::timeout(
        Duration::from_millis(10),
        p.run(json!({}), RunOptions::default()),
    )
    .await;
    assert!(res.is_err(), "the caller gave up");
    let records = sink.requests();
    assert_eq!(records.len(), 1);
    let r = &records[0];
    assert_eq!(r.status, RequestStatus::Cancelled);
    assert_eq!(status(r, "slow"), "cancelled");
    let spans = sink.spans_of(r.request_id);
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[1].status, SpanStatus::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn guards_can_rerun_their_upstream() {
    let out = run_once(
        r#"
topology_id: rerun
version: "1"
nodes:
  - { id: gen, type: test, config: { count: true } }
  - { id: guard, type: test, config: { rerun: { upstream: gen, until: 3 }, value: fine } }
edges:
  - { from: gen, to: guard }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap(), json!("fine"));
    let gen_spans: Vec<_> = out
        .trace
        .spans
        .iter()
        .filter(|s| &*s.node == "gen")
        .collect();
    assert_eq!(gen_spans.len(), 3);
    assert_eq!(gen_spans[1].role, SpanRole::Rerun { by: "guard".into() });
    let r = &out.trace.record;
    assert!(
        r.explanation
            .text
            .contains("`guard` had `gen` re-run 2 times"),
        "{}",
        r.explanation.text
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_names_its_spans_worker_and_learns_when_its_attempt_is_over() {
    let out = run_once(
        r#"
topology_id: placed
version: "1"
nodes:
  - { id: first, type: test }
  - { id: placed_hang, type: test, retries: 1, backoff_ms: 1, timeout_ms: 50, config: { worker: w9, hang: true, keep_cx: true } }
edges:
  - { from: first, to: placed_hang }
"#,
    ).await;
    assert!(out.result.is_err());
    let workers: Vec<(&str, &str)> = out
        .trace
        .spans
        .iter()
        .map(|s| (s.node.as_ref(), s.worker.as_ref()))
        .collect();
    assert_eq!(
        workers,
        [
            ("first", "local"),
            ("placed_hang", "w9"),
            ("placed_hang", "w9")
        ],
        "a placed attempt names its worker; others keep the pipeline's"
    );
    let kept: Vec<(bool, bool)> = crate::support::KEPT
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _, _)| id == "placed_hang")
        .map(|(_, cx, at_call)| (*at_call, cx.attempt_over()))
        .collect();
    assert_eq!(
        kept,
        [(false, true), (false, true)],
        "running when called, over once timed out"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_knows_how_long_the_engine_will_still_wait_for_it() {
    // 300 ms go to `slow` first; `left_deadline` then has 700 ms of the
    // request's deadline, less than its own timeout; `left_timeout`'s own
    // 200 ms end first.
    let out = run_once(
        r#"
topology_id: left
version: "1"
defaults: { deadline_ms: 1000 }
nodes:
  - { id: slow, type: test, config: { sleep_ms: 300 } }
  - { id: left_deadline, type: test, timeout_ms: 5000, config: { keep_cx: true } }
  - { id: left_timeout, type: test, timeout_ms: 200, config: { keep_cx: true } }
edges:
  - { from: slow, to: left_deadline }
  - { from: slow, to: left_timeout }
"#,
    )
    .await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    let mut left: Vec<(String, Option<Duration>)> = crate::support::LEFT
        .lock()
        .unwrap()
        .iter()
        .filter(|(id, _)| id.starts_with("left_"))
        .cloned()
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            (
                "left_deadline".to_string(),
                Some(Duration::from_millis(700))
            ),
            ("left_timeout".to_string(), Some(Duration::from_millis(200))),
        ]
    );
}
