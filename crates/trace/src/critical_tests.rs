//! Critical paths of hand-built requests: parallel branches, retries,
//! skipped nodes, fallbacks, records without spans.

use rust_decimal::Decimal;

use super::*;
use crate::record::{NodeStatus, PathEdge, PathNode};
use crate::span::{SpanRole, SpanStatus, Usage};
use crate::{RequestId, Tags};

/// A node that ran from `start` to `end` (or, with `None`, did not run).
fn node(id: &str, times: Option<(u64, u64)>) -> PathNode {
    PathNode {
        id: id.into(),
        kind: "test".into(),
        status: if times.is_some() {
            NodeStatus::Succeeded
        } else {
            NodeStatus::Skipped
        },
        start_us: times.map(|t| t.0),
        end_us: times.map(|t| t.1),
        duration_us: times.map(|t| t.1 - t.0),
        attempts: u32::from(times.is_some()),
        label: None,
        fallback: None,
        replaces: None,
    }
}

fn edge(from: &str, to: &str, taken: bool) -> PathEdge {
    PathEdge {
        from: from.into(),
        to: to.into(),
        condition: None,
        taken,
        why: "test".into(),
    }
}

fn span(node: &str, attempt: u32, start: u64, end: u64, ok: bool) -> SpanRecord {
    SpanRecord {
        request_id: RequestId(1),
        node: node.into(),
        kind: "test".into(),
        attempt,
        role: SpanRole::Primary,
        started_at_us: start,
        start_us: start,
        end_us: end,
        status: if ok {
            SpanStatus::Ok
        } else {
            SpanStatus::Error
        },
        error: None,
        tags: Tags::new(),
        usage: Usage::default(),
        cost: Decimal::ZERO,
        worker: "w".into(),
        input_summary: "".into(),
        output_summary: "".into(),
    }
}

/// Spans for nodes that each ran once, at the times in the path.
fn spans_of(path: &PathRecord) -> Vec<SpanRecord> {
    path.nodes
        .iter()
        .filter_map(|n| Some(span(&n.id, 1, n.start_us?, n.end_us?, true)))
        .collect()
}

fn names(cp: &CriticalPath) -> Vec<&str> {
    cp.steps.iter().map(|s| &*s.node).collect()
}

#[test]
fn the_slower_parallel_branch_sets_the_latency_not_the_sum() {
    // route → {web, kb} → merge → llm; `kb` finishes long before `web`.
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("route", Some((0, 10))),
            node("web", Some((12, 400))),
            node("kb", Some((12, 150))),
            node("merge", Some((401, 410))),
            node("llm", Some((410, 900))),
        ],
        edges: vec![
            edge("route", "web", true),
            edge("route", "kb", true),
            edge("web", "merge", true),
            edge("kb", "merge", true),
            edge("merge", "llm", true),
        ],
    };
    let cp = critical_path(&path, &spans_of(&path));
    assert_eq!(names(&cp), ["route", "web", "merge", "llm"]);
    assert_eq!(cp.off_path, [Arc::<str>::from("kb")]);
    assert_eq!(cp.end_us, 900);
    // The nodes' times summed are more than the latency: kb overlapped.
    assert_eq!(cp.nodes_total_us, 10 + 388 + 138 + 9 + 490);
    let added: Vec<u64> = cp.steps.iter().map(|s| s.added_us).collect();
    assert_eq!(added, [10, 390, 10, 490]);
    assert_eq!(added.iter().sum::<u64>(), cp.end_us);
    assert_eq!(cp.steps[1].wait_us, 2);
    assert_eq!(cp.dominant().map(|s| &*s.node), Some("llm"));

    // When kb is the slow one, the path goes through kb instead.
    let mut slow_kb = path.clone();
    slow_kb.nodes[2] = node("kb", Some((12, 450)));
    slow_kb.nodes[3] = node("merge", Some((451, 460)));
    let cp = critical_path(&slow_kb, &spans_of(&slow_kb));
    assert_eq!(names(&cp), ["route", "kb", "merge", "llm"]);
    assert_eq!(cp.off_path, [Arc::<str>::from("web")]);
}

#[test]
fn retries_and_their_backoff_belong_to_the_node() {
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("a", Some((0, 10))),
            node("b", Some((10, 120))),
            node("c", Some((120, 130))),
        ],
        edges: vec![edge("a", "b", true), edge("b", "c", true)],
    };
    let spans = vec![
        span("a", 1, 0, 10, true),
        span("b", 1, 10, 50, false),
        // 10 µs of backoff, then the attempt that succeeded.
        span("b", 2, 60, 120, true),
        span("c", 1, 120, 130, true),
    ];
    let cp = critical_path(&path, &spans);
    assert_eq!(names(&cp), ["a", "b", "c"]);
    assert_eq!(cp.steps[1].attempts, 2);
    assert_eq!(cp.steps[1].added_us, 110);
    // The mark goes on the attempt that ended the node's time.
    assert_eq!(cp.span_marks(&spans), [Some(10), None, Some(110), Some(10)]);
}

#[test]
fn skipped_nodes_are_never_on_the_path() {
    // The router sent the request to retrieval; the direct branch was skipped.
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("route", Some((0, 5))),
            node("direct", None),
            node("retrieve", Some((5, 50))),
            node("llm", Some((50, 100))),
        ],
        edges: vec![
            edge("route", "direct", false),
            edge("route", "retrieve", true),
            edge("direct", "llm", false),
            edge("retrieve", "llm", true),
        ],
    };
    let cp = critical_path(&path, &spans_of(&path));
    assert_eq!(names(&cp), ["route", "retrieve", "llm"]);
    assert!(cp.off_path.is_empty());
    assert!(!cp.contains("direct"));
    assert_eq!(cp.end_us, 100);
}

#[test]
fn a_fallback_follows_the_node_it_replaced() {
    let mut llm = node("llm", Some((5, 105)));
    llm.status = NodeStatus::FellBack;
    llm.fallback = Some("llm_small".into());
    let mut small = node("llm_small", Some((105, 130)));
    small.replaces = Some("llm".into());
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("prompt", Some((0, 5))),
            llm,
            node("validate", Some((130, 135))),
            small,
        ],
        edges: vec![edge("prompt", "llm", true), edge("llm", "validate", true)],
    };
    let cp = critical_path(&path, &spans_of(&path));
    assert_eq!(names(&cp), ["prompt", "llm", "llm_small", "validate"]);
    assert_eq!(cp.end_us, 135);
}

#[test]
fn a_condition_decided_late_still_gates_its_target() {
    // `check` ran and its edge was not taken, but `answer` waited for it.
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("start", Some((0, 5))),
            node("check", Some((5, 300))),
            node("fetch", Some((5, 40))),
            node("answer", Some((300, 320))),
        ],
        edges: vec![
            edge("start", "check", true),
            edge("start", "fetch", true),
            edge("check", "answer", false),
            edge("fetch", "answer", true),
        ],
    };
    let cp = critical_path(&path, &spans_of(&path));
    assert_eq!(names(&cp), ["start", "check", "answer"]);
}

#[test]
fn records_without_spans_use_the_path_times_and_empty_paths_are_empty() {
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![node("a", Some((0, 10))), node("b", Some((10, 30)))],
        edges: vec![edge("a", "b", true)],
    };
    let cp = critical_path::<SpanRecord>(&path, &[]);
    assert_eq!(names(&cp), ["a", "b"]);
    assert_eq!(cp.end_us, 30);
    assert_eq!(
        critical_path::<SpanRecord>(&PathRecord::default(), &[]),
        CriticalPath::default()
    );
}

fn encloses(from: &str, to: &str) -> PathEdge {
    PathEdge {
        why: ENCLOSES.into(),
        ..edge(from, to, true)
    }
}

#[test]
fn an_ingested_parent_span_waits_for_its_children_to_end() {
    // An ingested trace: `answer` encloses `prep` and `work`; `work`
    // encloses `fetch` then `llm` (ran after it), and `work` ran after `prep`.
    let path = PathRecord {
        loops: Vec::new(),
        nodes: vec![
            node("answer", Some((0, 1000))),
            node("prep", Some((5, 100))),
            node("work", Some((110, 990))),
            node("fetch", Some((120, 300))),
            node("llm", Some((310, 980))),
        ],
        edges: vec![
            encloses("answer", "prep"),
            encloses("answer", "work"),
            edge("prep", "work", true),
            encloses("work", "fetch"),
            encloses("work", "llm"),
            edge("fetch", "llm", true),
        ],
    };
    let cp = critical_path(&path, &spans_of(&path));
    // Not just the root that ended last: the chain inside it, first to last.
    assert_eq!(names(&cp), ["prep", "fetch", "llm", "work", "answer"]);
    let added: Vec<u64> = cp.steps.iter().map(|s| s.added_us).collect();
    assert_eq!(added, [100, 200, 680, 10, 10]);
    assert_eq!(added.iter().sum::<u64>(), cp.end_us);
    assert_eq!(cp.dominant().map(|s| &*s.node), Some("llm"));
    assert!(cp.off_path.is_empty());
}
