//! Bounded loops: a back edge re-runs the loop's body while its condition
//! holds and its bound allows; spans carry the iteration, receipts bill
//! each iteration, the path records why the loop stopped, and what comes
//! after the loop waits for its last iteration.

use glassbox_engine::RunOptions;
use glassbox_engine::trace::{
    Divergence, ITERATION_TAG, Lang, LoopStop, TraceDiff, critical_path, explain, span_iteration,
};
use rust_decimal::Decimal;
use serde_json::json;

use crate::support::{pipeline, run_once, status};

/// draft → revise → check; check goes back to revise while `more` holds,
/// and on to publish when `done` holds (an edge held until the loop ends).
fn revise_loop(more: &str, done: &str, bound: &str) -> String {
    format!(
        r#"
topology_id: revise
version: "1"
nodes:
  - {{ id: draft, type: test }}
  - {{ id: revise, type: test, config: {{ count: true }} }}
  - {{ id: check, type: test, resource: {{ type: cpu, cost_per_call: 0.01 }}, config: {{ count: true, tokens: [10, 5] }} }}
  - {{ id: publish, type: test, config: {{ value: published }} }}
edges:
  - {{ from: draft, to: revise }}
  - {{ from: revise, to: check }}
  - {{ from: check, to: revise, condition: '{more}', loop: {bound} }}
  - {{ from: check, to: publish, condition: '{done}' }}
"#
    )
}

/// The revise loop with a condition that always holds: only `bound` stops it.
async fn run_until_bound(bound: &str) -> glassbox_engine::Outcome {
    run_once(&revise_loop("1 == 1", "1 == 1", bound)).await
}

/// A loop stopped by one of its bounds.
fn stopped_by(bound: &str, limit: &str, spent: &str) -> LoopStop {
    LoopStop::Bound {
        bound: bound.into(),
        limit: limit.into(),
        spent: spent.into(),
    }
}

#[tokio::test(start_paused = true)]
async fn the_body_runs_again_while_the_back_edge_condition_holds() {
    let out = run_once(&revise_loop(
        "outputs.check.n < 3",
        "outputs.check.n >= 3",
        "{ max_iterations: 5 }",
    ))
    .await;
    assert_eq!(out.result.unwrap(), json!("published"));
    let r = &out.trace.record;
    for n in ["draft", "revise", "check", "publish"] {
        assert_eq!(status(r, n), "succeeded", "{n}");
    }
    // Every span of a body node carries its iteration; others none.
    let iters = |node: &str| -> Vec<Option<u32>> {
        out.trace
            .spans
            .iter()
            .filter(|s| &*s.node == node)
            .map(|s| span_iteration(s))
            .collect()
    };
    assert_eq!(iters("revise"), [Some(1), Some(2), Some(3)]);
    assert_eq!(iters("check"), [Some(1), Some(2), Some(3)]);
    assert_eq!(iters("draft"), [None]);
    assert_eq!(iters("publish"), [None]);
    assert!(
        out.trace
            .spans
            .iter()
            .filter(|s| &*s.node == "draft")
            .all(|s| !s.tags.contains_key(ITERATION_TAG))
    );
    // The loop's record: three iterations, stopped by the condition.
    let l = &r.path.loops[0];
    assert_eq!((&*l.from, &*l.to), ("check", "revise"));
    assert_eq!(
        l.body,
        ["revise".into(), "check".into()] as [std::sync::Arc<str>; 2]
    );
    assert_eq!(l.iterations.len(), 3);
    assert_eq!(l.iterations[0].tokens, 15);
    assert_eq!(l.cost(), Decimal::new(3, 2));
    match &l.stopped {
        LoopStop::Condition { why } => {
            assert!(why.starts_with("outputs.check.n < 3 is false"), "{why}");
            assert!(why.contains("outputs.check.n = 3"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // The edge after the loop resolved once, from the last iteration.
    let after = r.path.edge("check", "publish").unwrap();
    assert!(after.taken, "{}", after.why);
    // The receipt bills check once per iteration, and adds up.
    let lines: Vec<_> = r
        .receipt
        .lines
        .iter()
        .filter(|l| &*l.node == "check")
        .map(|l| (l.iteration, l.amount))
        .collect();
    let cent = Decimal::new(1, 2);
    assert_eq!(lines, [(Some(1), cent), (Some(2), cent), (Some(3), cent)]);
    assert_eq!(r.receipt.iteration_total("check", 2), cent);
    assert_eq!(r.receipt.total, r.receipt.sum_of_lines());
    // The explanation says how often the loop ran and why it stopped.
    assert!(
        r.explanation.text.contains(
            "The loop `revise → check` ran 3 times: 1. revise → check; 2. revise → check; \
             3. revise → check; it stopped because the back edge `check → revise` was not \
             taken: outputs.check.n < 3 is false"
        ),
        "{}",
        r.explanation.text
    );
    let zh = explain::compose(&r.explanation.facts, &r.path, None, Lang::Zh);
    assert!(zh.contains("循环 `revise → check` 运行了 3 次"), "{zh}");
    // publish started only after the last iteration's check ended.
    let last_check = out
        .trace
        .spans
        .iter()
        .filter(|s| &*s.node == "check")
        .map(|s| s.end_us)
        .max()
        .unwrap();
    let publish = r.path.node("publish").unwrap();
    assert!(publish.start_us.unwrap() >= last_check);
}

#[tokio::test(start_paused = true)]
async fn max_iterations_stops_a_loop_whose_condition_always_holds() {
    let out = run_until_bound("{ max_iterations: 2 }").await;
    assert_eq!(out.result.unwrap(), json!("published"));
    let r = &out.trace.record;
    let l = &r.path.loops[0];
    assert_eq!(l.iterations.len(), 2);
    assert_eq!(l.stopped, stopped_by("max_iterations", "2", "2 iterations"));
    let back = r.path.edge("check", "revise").unwrap();
    assert!(!back.taken);
    assert!(
        back.why.contains("reached `max_iterations` 2"),
        "{}",
        back.why
    );
    assert!(
        r.explanation.text.contains(
            "it stopped because it reached its bound `max_iterations` 2 (spent: 2 iterations)"
        ),
        "{}",
        r.explanation.text
    );
    assert_eq!(status(r, "publish"), "succeeded");
}

#[tokio::test(start_paused = true)]
async fn a_token_budget_stops_the_loop_before_the_next_iteration() {
    // Each check uses 15 tokens: after two iterations 30 ≥ 30.
    let out = run_until_bound("{ max_iterations: 10, max_tokens: 30 }").await;
    let r = &out.trace.record;
    let l = &r.path.loops[0];
    assert_eq!(l.iterations.len(), 2);
    assert_eq!(l.stopped, stopped_by("max_tokens", "30", "30 tokens"));
    // And a cost budget: each iteration costs 0.01.
    let out = run_until_bound("{ max_iterations: 10, max_cost: 0.025 }").await;
    let l = &out.trace.record.path.loops[0];
    assert_eq!(l.iterations.len(), 3);
    assert!(
        matches!(&l.stopped, LoopStop::Bound { bound, spent, .. } if bound == "max_cost" && spent == "0.03 USD"),
        "{:?}",
        l.stopped
    );
}

#[tokio::test(start_paused = true)]
async fn a_skipped_tail_ends_the_loop_and_says_why() {
    // check routes: `again` while n < 2, then `ok`; revise runs on `again`
    // and goes back to check.
    let yaml = r#"
topology_id: route-loop
version: "1"
nodes:
  - { id: draft, type: test }
  - { id: check, type: test, config: { count: true } }
  - { id: gate, type: test }
  - { id: revise, type: test }
  - { id: publish, type: test, config: { value: out } }
edges:
  - { from: draft, to: check }
  - { from: check, to: gate }
  - { from: gate, to: revise, condition: 'outputs.check.n < 2' }
  - { from: revise, to: check, loop: { max_iterations: 4 } }
  - { from: gate, to: publish, condition: 'outputs.check.n >= 2' }
"#;
    let out = run_once(yaml).await;
    assert_eq!(out.result.unwrap(), json!("out"));
    let r = &out.trace.record;
    let l = &r.path.loops[0];
    assert_eq!(l.iterations.len(), 2);
    assert_eq!(
        l.iterations[1]
            .ran
            .iter()
            .map(|n| &*n.node)
            .collect::<Vec<_>>(),
        ["check", "gate"]
    );
    match &l.stopped {
        LoopStop::Condition { why } => assert!(
            why.starts_with("revise did not run (outputs.check.n < 2 is false"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    // revise ran in iteration 1 only: still succeeded on the path.
    assert_eq!(status(r, "revise"), "succeeded");
    assert_eq!(r.path.node("revise").unwrap().attempts, 1);
}

#[tokio::test(start_paused = true)]
async fn critical_path_and_diff_see_each_iteration() {
    let yaml = |rounds: u32| {
        revise_loop(
            &format!("outputs.check.n < {rounds}"),
            "1 == 1",
            "{ max_iterations: 5 }",
        )
    };
    let (p3, _) = pipeline(&yaml(3));
    let (p1, _) = pipeline(&yaml(1));
    let a = p3.run(json!({}), RunOptions::default()).await.trace;
    let b = p1.run(json!({}), RunOptions::default()).await.trace;
    let cp = critical_path(&a.record.path, &a.spans);
    let steps: Vec<(&str, Option<u32>)> =
        cp.steps.iter().map(|s| (&*s.node, s.iteration)).collect();
    assert_eq!(
        steps,
        [
            ("draft", None),
            ("revise", Some(1)),
            ("check", Some(1)),
            ("revise", Some(2)),
            ("check", Some(2)),
            ("revise", Some(3)),
            ("check", Some(3)),
            ("publish", None),
        ]
    );
    // Each step's span is marked once, the last iteration's included.
    let marks = cp.span_marks(&a.spans);
    assert_eq!(marks.iter().filter(|m| m.is_some()).count(), 8);

    let (sa, sb): (Vec<_>, Vec<_>) = (
        a.spans.iter().map(|s| (**s).clone()).collect(),
        b.spans.iter().map(|s| (**s).clone()).collect(),
    );
    let d = TraceDiff::between(
        glassbox_engine::trace::diff::Side {
            record: &a.record,
            spans: &sa,
        },
        glassbox_engine::trace::diff::Side {
            record: &b.record,
            spans: &sb,
        },
    );
    assert_eq!(
        d.first_divergence,
        Some(Divergence::Iterations {
            node: "revise".into(),
            a: 3,
            b: 1
        })
    );
    let words = d.explain(Lang::En);
    assert!(
        words.contains("first differ in the loop that starts at `revise`: it ran 3 time(s) in A"),
        "{words}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_self_loop_reruns_one_node() {
    let yaml = r#"
topology_id: self-loop
version: "1"
nodes:
  - { id: poll, type: test, config: { count: true } }
edges:
  - { from: poll, to: poll, condition: 'outputs.poll.n < 4', loop: { max_iterations: 10 } }
"#;
    let out = run_once(yaml).await;
    assert_eq!(out.result.unwrap(), json!({"n": 4}));
    assert_eq!(out.trace.record.path.loops[0].iterations.len(), 4);
    assert_eq!(out.trace.spans.len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_time_budget_is_checked_at_the_back_edge() {
    // Each iteration takes 40 ms: after three, 120 ms ≥ 100 ms.
    let yaml = r#"
topology_id: slow-loop
version: "1"
nodes:
  - { id: work, type: test, config: { sleep_ms: 40 } }
  - { id: done, type: test, config: { value: done } }
edges:
  - { from: work, to: work, loop: { max_iterations: 10, max_time_ms: 100 } }
  - { from: work, to: done }
"#;
    let out = run_once(yaml).await;
    assert_eq!(out.result.unwrap(), json!("done"));
    let l = &out.trace.record.path.loops[0];
    assert_eq!(l.iterations.len(), 3);
    assert!(
        matches!(&l.stopped, LoopStop::Bound { bound, limit, spent } if bound == "max_time_ms" && limit == "100" && spent == "120 ms"),
        "{:?}",
        l.stopped
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_inside_a_loop_ends_it_and_keeps_its_iterations() {
    let yaml = r#"
topology_id: cut-loop
version: "1"
defaults: { deadline_ms: 100 }
nodes:
  - { id: work, type: test, config: { sleep_ms: 40 } }
edges:
  - { from: work, to: work, loop: { max_iterations: 10 } }
"#;
    let out = run_once(yaml).await;
    assert!(out.result.is_err());
    let r = &out.trace.record;
    let l = &r.path.loops[0];
    // Two iterations finished, the third was cut by the deadline.
    assert_eq!(l.iterations.len(), 3);
    assert_eq!(l.stopped, LoopStop::Ended);
    let iters: Vec<Option<u32>> = out.trace.spans.iter().map(|s| span_iteration(s)).collect();
    assert_eq!(iters, [Some(1), Some(2), Some(3)]);
    assert!(
        r.explanation
            .text
            .contains("it stopped because the request ended during the last iteration"),
        "{}",
        r.explanation.text
    );
}
