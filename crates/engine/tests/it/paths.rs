//! Path generation: joins, dead-path elimination, concurrency, conditions.

use std::time::Duration;

use glassbox_engine::RunOptions;
use serde_json::json;

use crate::support::{pipeline, run_once, status};

#[tokio::test(start_paused = true)]
async fn diamond_join_waits_for_both_branches() {
    let out = run_once(
        r#"
topology_id: diamond
version: "1"
nodes:
  - { id: a, type: test }
  - { id: b, type: test, config: { sleep_ms: 30 } }
  - { id: c, type: test, config: { sleep_ms: 10 } }
  - { id: d, type: test, config: { value: done } }
edges:
  - { from: a, to: b }
  - { from: a, to: c }
  - { from: b, to: d }
  - { from: c, to: d }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap(), json!("done"));
    let r = &out.trace.record;
    for n in ["a", "b", "c", "d"] {
        assert_eq!(status(r, n), "succeeded", "{n}");
    }
    // d started only after the slower branch ended.
    let b = r.path.node("b").unwrap();
    let d = r.path.node("d").unwrap();
    assert!(d.start_us.unwrap() >= b.end_us.unwrap());
    assert_eq!(out.trace.spans.len(), 4);
    assert!(
        r.path
            .edges
            .iter()
            .all(|e| e.taken && e.why.starts_with("no condition"))
    );
}

#[tokio::test(start_paused = true)]
async fn skips_propagate_through_several_levels() {
    let out = run_once(
        r#"
topology_id: skip
version: "1"
nodes:
  - { id: route, type: test, config: { label: left } }
  - { id: l1, type: test }
  - { id: r1, type: test }
  - { id: r2, type: test }
  - { id: r3, type: test }
  - { id: join, type: test, config: { value: joined } }
edges:
  - { from: route, to: l1, condition: left }
  - { from: route, to: r1, condition: right }
  - { from: r1, to: r2 }
  - { from: r2, to: r3 }
  - { from: r3, to: join }
  - { from: l1, to: join }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap(), json!("joined"));
    let r = &out.trace.record;
    assert_eq!(status(r, "l1"), "succeeded");
    for n in ["r1", "r2", "r3"] {
        assert_eq!(status(r, n), "skipped", "{n}");
    }
    assert_eq!(status(r, "join"), "succeeded");
    let e = r.path.edge("route", "r1").unwrap();
    assert!(!e.taken);
    assert_eq!(e.why, "route emitted label left, not right");
    let e = r.path.edge("route", "l1").unwrap();
    assert_eq!(e.why, "label left emitted by route (rule rule_left)");
    assert_eq!(r.path.edge("r2", "r3").unwrap().why, "source skipped");
    assert_eq!(r.path.edge("r3", "join").unwrap().why, "source skipped");
    assert_eq!(r.labels.get("route").map(String::as_str), Some("left"));
    // Skipped nodes have no spans.
    assert_eq!(out.trace.spans.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn when_everything_upstream_is_dead_the_exit_is_skipped() {
    let out = run_once(
        r#"
topology_id: dead
version: "1"
nodes:
  - { id: route, type: test, config: { label: nope } }
  - { id: x, type: test }
  - { id: y, type: test }
edges:
  - { from: route, to: x, condition: yes }
  - { from: x, to: y }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap(), json!(null));
    assert_eq!(status(&out.trace.record, "y"), "skipped");
}

#[tokio::test(start_paused = true)]
async fn two_branches_run_at_the_same_time() {
    let (p, _sink) = pipeline(
        r#"
topology_id: parallel
version: "1"
nodes:
  - { id: start, type: test }
  - { id: slow_a, type: test, config: { sleep_ms: 100 } }
  - { id: slow_b, type: test, config: { sleep_ms: 100 } }
  - { id: end, type: test }
edges:
  - { from: start, to: slow_a }
  - { from: start, to: slow_b }
  - { from: slow_a, to: end }
  - { from: slow_b, to: end }
"#,
    );
    let before = tokio::time::Instant::now();
    let out = p.run(json!({}), RunOptions::default()).await;
    out.result.unwrap();
    // Virtual time: serial execution would take 200 ms.
    assert_eq!(before.elapsed(), Duration::from_millis(100));
    let r = &out.trace.record;
    let a = r.path.node("slow_a").unwrap();
    let b = r.path.node("slow_b").unwrap();
    assert!(
        a.start_us < b.end_us && b.start_us < a.end_us,
        "spans overlap: {a:?} {b:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn conditions_read_outputs_and_say_what_they_read() {
    let (p, _sink) = pipeline(
        r#"
topology_id: cond
version: "1"
nodes:
  - { id: retrieve, type: test, config: { value: { hits: [1, 2, 3] } } }
  - { id: rerank, type: test }
  - { id: answer, type: test, config: { value: answered } }
edges:
  - { from: retrieve, to: rerank, condition: 'size(outputs.retrieve.hits) > 5' }
  - { from: retrieve, to: answer, condition: 'size(outputs.retrieve.hits) <= 5 && input.lang == "en"' }
"#,
    );
    let out = p.run(json!({"lang": "en"}), RunOptions::default()).await;
    let r = &out.trace.record;
    assert_eq!(status(r, "rerank"), "skipped");
    assert_eq!(status(r, "answer"), "succeeded");
    let e = r.path.edge("retrieve", "rerank").unwrap();
    assert!(!e.taken);
    assert_eq!(
        e.why,
        "size(outputs.retrieve.hits) > 5 is false (outputs.retrieve.hits = [3 items])"
    );
    let e = r.path.edge("retrieve", "answer").unwrap();
    assert!(e.taken);
    assert!(e.why.contains(r#"input.lang = "en""#), "{}", e.why);
    assert_eq!(
        e.condition.as_deref(),
        Some(r#"size(outputs.retrieve.hits) <= 5 && input.lang == "en""#)
    );
}

#[tokio::test(start_paused = true)]
async fn labels_from_the_input_pick_the_branch() {
    let yaml = r#"
topology_id: route
version: "1"
nodes:
  - { id: route, type: test, config: { label_from: kind } }
  - { id: a, type: test, config: { value: A } }
  - { id: b, type: test, config: { value: B } }
edges:
  - { from: route, to: a, condition: alpha }
  - { from: route, to: b, condition: beta }
"#;
    let (p, sink) = pipeline(yaml);
    let out = p.run(json!({"kind": "beta"}), RunOptions::default()).await;
    assert_eq!(out.result.unwrap(), json!("B"));
    let out = p.run(json!({"kind": "alpha"}), RunOptions::default()).await;
    assert_eq!(out.result.unwrap(), json!("A"));
    assert_eq!(sink.request_count(), 2);
    let rec = sink.record(out.trace.record.request_id).unwrap();
    assert_eq!(
        rec.path.taken_nodes().collect::<Vec<_>>(),
        vec!["route", "a"]
    );
}

#[tokio::test(start_paused = true)]
async fn blocking_nodes_run_off_the_reactor() {
    let out = run_once(
        r#"
topology_id: blocking
version: "1"
nodes:
  - { id: cpu, type: test, config: { blocking: true, value: crunched } }
"#,
    )
    .await;
    assert_eq!(out.result.unwrap(), json!("crunched"));
    assert!(out.trace.spans[0].usage.cpu_us.is_some());
}
