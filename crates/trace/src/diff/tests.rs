//! Diff tests on hand-built records of a three-way router topology:
//! `route` → `pricing` | `general` → `check`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use rust_decimal::Decimal;

use super::*;
use crate::{Explanation, Lang, NodeFacts, PathEdge, PathNode, Receipt, SpanRole, Unit, Usage};

struct Req {
    id: u128,
    question: &'static str,
    label: &'static str,
    guard_passed: bool,
    answer: &'static str,
    llm_us: u64,
}

fn req(id: u128, question: &'static str, label: &'static str) -> Req {
    Req {
        id,
        question,
        label,
        guard_passed: true,
        answer: "Plans start at $9",
        llm_us: 1000,
    }
}

fn build(r: &Req) -> (RequestRecord, Vec<SpanRecord>) {
    let branch = if r.label == "pricing" {
        "pricing"
    } else {
        "general"
    };
    let other = if branch == "pricing" {
        "general"
    } else {
        "pricing"
    };
    let node = |id: &str, kind: &str, status: NodeStatus, start: u64, dur: u64| PathNode {
        id: id.into(),
        kind: kind.into(),
        status,
        start_us: (status != NodeStatus::Skipped).then_some(start),
        end_us: (status != NodeStatus::Skipped).then_some(start + dur),
        duration_us: (status != NodeStatus::Skipped).then_some(dur),
        attempts: u32::from(status != NodeStatus::Skipped),
        label: (id == "route").then(|| r.label.to_string()),
        fallback: None,
        replaces: None,
    };
    let mut nodes = vec![
        node("route", "router", NodeStatus::Succeeded, 0, 100),
        node("pricing", "template", NodeStatus::Skipped, 100, r.llm_us),
        node("general", "template", NodeStatus::Skipped, 100, r.llm_us),
        node(
            "check",
            "output_guard",
            NodeStatus::Succeeded,
            100 + r.llm_us,
            50,
        ),
    ];
    for n in &mut nodes {
        if &*n.id == branch {
            *n = node(branch, "template", NodeStatus::Succeeded, 100, r.llm_us);
        }
    }
    let edge = |from: &str, to: &str, taken: bool, why: &'static str| PathEdge {
        from: from.into(),
        to: to.into(),
        condition: None,
        taken,
        why: Cow::Borrowed(why),
    };
    let edges = vec![
        edge("route", branch, true, "label matched"),
        edge("route", other, false, "label did not match"),
        edge(branch, "check", true, "no condition"),
        edge(other, "check", false, "source skipped"),
    ];
    let span =
        |node: &str, kind: &str, start: u64, end: u64, input: &str, output: &str| SpanRecord {
            request_id: RequestId(r.id),
            node: node.into(),
            kind: kind.into(),
            attempt: 1,
            role: SpanRole::Primary,
            started_at_us: 1_000_000 + start,
            start_us: start,
            end_us: end,
            status: SpanStatus::Ok,
            error: None,
            tags: BTreeMap::new(),
            usage: Usage {
                wall_us: end - start,
                ..Usage::default()
            },
            cost: Decimal::ZERO,
            worker: "w".into(),
            input_summary: input.into(),
            output_summary: output.into(),
        };
    let input = format!("{{\"question\":\"{}\"}}", r.question);
    let answer = if r.guard_passed { r.answer } else { "Sorry" };
    let spans = vec![
        span("route", "router", 0, 100, &input, r.label),
        span(branch, "template", 100, 100 + r.llm_us, &input, r.answer),
        span(
            "check",
            "output_guard",
            100 + r.llm_us,
            150 + r.llm_us,
            r.answer,
            answer,
        ),
    ];
    let mut receipt = Receipt::new("USD".into());
    for n in ["route", branch, "check"] {
        receipt.push(n.into(), Unit::Call, Decimal::ONE, Decimal::new(1, 4));
    }
    let facts = vec![
        NodeFacts {
            node: "route".into(),
            kind: "router".into(),
            facts: vec![Fact::Routed {
                label: r.label.into(),
                rule: (r.label == "pricing").then(|| "mentions_price".to_string()),
                reason: String::new(),
            }],
        },
        NodeFacts {
            node: "check".into(),
            kind: "output_guard".into(),
            facts: vec![Fact::Guarded {
                passed: r.guard_passed,
                rules: 2,
                hits: if r.guard_passed {
                    vec![]
                } else {
                    vec!["no_email".into()]
                },
                action: (!r.guard_passed).then(|| "replaced".to_string()),
            }],
        },
    ];
    let record = RequestRecord {
        request_id: RequestId(r.id),
        topology_id: "moderation".into(),
        version: "1.0.0".into(),
        started_at_us: 1_000_000,
        ended_at_us: 1_000_150 + r.llm_us,
        duration_us: 150 + r.llm_us,
        status: RequestStatus::Ok,
        degraded: false,
        error: None,
        path: PathRecord {
            nodes,
            edges,
            loops: Vec::new(),
        },
        labels: [(Arc::from("route"), r.label.to_string())]
            .into_iter()
            .collect(),
        models: vec![],
        input_summary: input,
        input_chars: None,
        input_tokens: None,
        output_summary: answer.into(),
        receipt,
        explanation: Explanation {
            lang: Lang::En,
            text: String::new(),
            facts,
        },
        worker: "w".into(),
        span_count: 3,
    };
    (record, spans)
}

fn diff(a: &Req, b: &Req) -> TraceDiff {
    let (ra, sa) = build(a);
    let (rb, sb) = build(b);
    TraceDiff::between(
        Side {
            record: &ra,
            spans: &sa,
        },
        Side {
            record: &rb,
            spans: &sb,
        },
    )
}

#[test]
fn a_different_route_is_the_first_divergence() {
    let d = diff(
        &req(1, "what is the price", "pricing"),
        &req(2, "hello there", "general"),
    );
    assert_eq!(
        d.first_divergence,
        Some(Divergence::Label {
            node: "route".into(),
            a: Some("pricing".into()),
            b: Some("general".into()),
        })
    );
    assert_eq!(d.only_in(), (vec!["pricing"], vec!["general"]));
    let taken: Vec<bool> = d.edges.iter().map(|e| e.differs).collect();
    assert_eq!(taken, vec![true, true, true, true]);
    let en = d.explain(Lang::En);
    assert!(en.contains("part at `route`"), "{en}");
    assert!(en.contains("rule `mentions_price`"), "{en}");
    assert!(en.contains("no rule matched; default"), "{en}");
    assert!(en.contains("only A ran `pricing`"), "{en}");
    assert!(en.contains("only B ran `general`"), "{en}");
    let zh = d.explain(Lang::Zh);
    assert!(zh.contains("在 `route` 分道"), "{zh}");
    assert!(zh.contains("只有 B 执行了 `general`"), "{zh}");
}

#[test]
fn a_guard_that_judged_otherwise_is_found_after_the_same_path() {
    let a = req(1, "what is the price", "pricing");
    let mut b = req(2, "price? mail me", "pricing");
    b.guard_passed = false;
    let d = diff(&a, &b);
    assert_eq!(
        d.first_divergence,
        Some(Divergence::Guard {
            node: "check".into(),
            a: Some(GuardOutcome::Passed),
            b: Some(GuardOutcome::Replaced),
        })
    );
    let en = d.explain(Lang::En);
    assert!(
        en.contains("guard `check`, which passed A's answer"),
        "{en}"
    );
    assert!(
        en.contains("flagged `no_email` and replaced the answer"),
        "{en}"
    );
    let zh = d.explain(Lang::Zh);
    assert!(zh.contains("输出检查 `check`"), "{zh}");
}

#[test]
fn the_same_path_with_other_input_names_the_input_and_the_slower_node() {
    let a = req(1, "what is the price", "pricing");
    let mut b = req(2, "what is the cost", "pricing");
    b.llm_us = 5000;
    let d = diff(&a, &b);
    assert!(
        matches!(&d.first_divergence, Some(Divergence::Input { b, .. }) if b.contains("cost")),
        "{:?}",
        d.first_divergence
    );
    let en = d.explain(Lang::En);
    assert!(en.contains("same path (route → pricing → check)"), "{en}");
    assert!(en.contains("B took 4.0 ms longer"), "{en}");
    assert!(
        en.contains("the largest change is `pricing`, +4.0 ms"),
        "{en}"
    );
    let zh = d.explain(Lang::Zh);
    assert!(zh.contains("B 比 A 慢 4.0 ms"), "{zh}");
}

#[test]
fn identical_requests_have_no_divergence_and_outputs_count() {
    let a = req(1, "what is the price", "pricing");
    let d = diff(&a, &req(2, "what is the price", "pricing"));
    assert_eq!(d.first_divergence, None);
    assert!(d.nodes.iter().all(|r| !r.differs));
    assert!(
        d.explain(Lang::En)
            .starts_with("Both requests took the same path")
    );
    let mut b = req(3, "what is the price", "pricing");
    b.answer = "Plans start at $10";
    let d = diff(&a, &b);
    assert!(
        matches!(&d.first_divergence, Some(Divergence::Output { node, .. }) if &**node == "pricing"),
        "{:?}",
        d.first_divergence
    );
}

#[test]
fn guard_outcomes_read_facts_and_rejections() {
    let (mut record, mut spans) = build(&req(1, "q", "pricing"));
    assert_eq!(
        guard_outcomes(&record, &spans).get("check"),
        Some(&GuardOutcome::Passed)
    );
    record.explanation.facts.retain(|f| &*f.node != "check");
    record.path.nodes[3].status = NodeStatus::Failed;
    spans[2].status = SpanStatus::Error;
    spans[2].error = Some(ErrorRecord {
        code: "rejected".into(),
        message: "blocked word".into(),
        node: Some("check".into()),
        attempt: Some(1),
        detail: None,
    });
    assert_eq!(
        guard_outcomes(&record, &spans).get("check"),
        Some(&GuardOutcome::Rejected)
    );
    assert_eq!(
        path_taken(&record.path),
        vec![Arc::<str>::from("route"), "pricing".into(), "check".into()]
    );
}
