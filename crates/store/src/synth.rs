//! Synthetic but realistic requests (the seeds' `rag-chat` path), for tests,
//! benchmarks and demos of the store without running models.

use std::collections::BTreeMap;
use std::sync::Arc;

use glassbox_trace::{
    ErrorRecord, Explanation, Fact, Lang, ModelUse, NodeFacts, NodeStatus, PathEdge, PathNode,
    PathRecord, Receipt, RequestId, RequestRecord, RequestStatus, SpanRecord, SpanRole, SpanStatus,
    Tags, Unit, Usage,
};
use rust_decimal::Decimal;

/// What kind of request to make.
#[derive(Debug, Clone)]
pub struct SynthRequest {
    pub id: RequestId,
    pub topology: String,
    pub version: String,
    pub started_at_us: u64,
    /// Take the retrieval branch (6 nodes) or answer directly (4 nodes).
    pub retrieval: bool,
    /// The LLM's first attempt times out and `llm_small` stands in.
    pub fallback: bool,
    /// The request fails at the guard.
    pub failed: bool,
    /// LLM wall time, microseconds (the rest is small).
    pub llm_us: u64,
    pub output_tokens: u64,
    pub input: String,
}

impl SynthRequest {
    /// A retrieval request for `rag-chat` 3.2.1 starting at `started_at_us`.
    pub fn new(seed: u64, started_at_us: u64) -> SynthRequest {
        let millis = u128::from(started_at_us / 1000) & ((1u128 << 48) - 1);
        SynthRequest {
            id: RequestId(millis << 80 | u128::from(seed)),
            topology: "rag-chat".into(),
            version: "3.2.1".into(),
            started_at_us,
            retrieval: true,
            fallback: false,
            failed: false,
            llm_us: 200_000,
            output_tokens: 128,
            input: format!("what is the price of plan {seed}?"),
        }
    }
}

struct Step {
    node: &'static str,
    kind: &'static str,
    us: u64,
    price: Decimal,
    status: SpanStatus,
    role: SpanRole,
}

fn d(units: i64, scale: u32) -> Decimal {
    Decimal::new(units, scale)
}

/// Builds the record and its spans (spans in the order they finished).
pub fn build(req: &SynthRequest) -> (RequestRecord, Vec<SpanRecord>) {
    let mut steps = vec![Step {
        node: "route",
        kind: "router",
        us: 300,
        price: d(2, 4),
        status: SpanStatus::Ok,
        role: SpanRole::Primary,
    }];
    if req.retrieval {
        steps.push(Step {
            node: "embed",
            kind: "embedding",
            us: 8_000,
            price: d(1, 3),
            status: SpanStatus::Ok,
            role: SpanRole::Primary,
        });
        steps.push(Step {
            node: "retrieve",
            kind: "vector_search",
            us: 4_000,
            price: d(5, 4),
            status: SpanStatus::Ok,
            role: SpanRole::Primary,
        });
    }
    steps.push(Step {
        node: "prompt",
        kind: "template",
        us: 150,
        price: d(1, 4),
        status: SpanStatus::Ok,
        role: SpanRole::Primary,
    });
    if req.fallback {
        steps.push(Step {
            node: "llm",
            kind: "llm_inference",
            us: req.llm_us,
            price: d(2, 2),
            status: SpanStatus::Timeout,
            role: SpanRole::Primary,
        });
        steps.push(Step {
            node: "llm_small",
            kind: "llm_inference",
            us: req.llm_us / 4,
            price: d(5, 3),
            status: SpanStatus::Ok,
            role: SpanRole::Fallback {
                replaces: "llm".into(),
            },
        });
    } else {
        steps.push(Step {
            node: "llm",
            kind: "llm_inference",
            us: req.llm_us,
            price: d(2, 2),
            status: SpanStatus::Ok,
            role: SpanRole::Primary,
        });
    }
    steps.push(Step {
        node: "validate",
        kind: "output_guard",
        us: 250,
        price: d(3, 4),
        status: if req.failed {
            SpanStatus::Error
        } else {
            SpanStatus::Ok
        },
        role: SpanRole::Primary,
    });

    let topology: Arc<str> = req.topology.as_str().into();
    let worker: Arc<str> = "local".into();
    let mut receipt = Receipt::new("USD".into());
    let mut spans = Vec::new();
    let mut nodes = Vec::new();
    let mut offset = 0u64;
    let input: Arc<str> = req.input.as_str().into();
    for step in &steps {
        let node: Arc<str> = step.node.into();
        let mut cost = receipt.push(node.clone(), Unit::Call, Decimal::ONE, step.price);
        let is_llm = step.kind == "llm_inference";
        let (input_tokens, output_tokens) = if is_llm && step.status == SpanStatus::Ok {
            let out = Decimal::from(req.output_tokens) / Decimal::from(1000);
            cost += receipt.push(node.clone(), Unit::OutputTokens1k, out, d(4, 3));
            (Some(64), Some(req.output_tokens))
        } else {
            (None, None)
        };
        let mut tags = Tags::new();
        if step.node == "route" {
            let label = if req.retrieval {
                "need_retrieval"
            } else {
                "direct_answer"
            };
            tags.insert("label".into(), label.into());
        }
        let error = match step.status {
            SpanStatus::Ok => None,
            SpanStatus::Timeout => Some(ErrorRecord {
                code: "timeout".into(),
                message: format!("`{}` timed out", step.node),
                node: Some(node.clone()),
                attempt: Some(1),
                detail: None,
            }),
            _ => Some(ErrorRecord {
                code: "guard_failed".into(),
                message: "output failed 1 rule".into(),
                node: Some(node.clone()),
                attempt: Some(1),
                detail: None,
            }),
        };
        spans.push(SpanRecord {
            request_id: req.id,
            node: node.clone(),
            kind: step.kind.into(),
            attempt: 1,
            role: step.role.clone(),
            started_at_us: req.started_at_us + offset,
            start_us: offset,
            end_us: offset + step.us,
            status: step.status,
            error,
            tags,
            usage: Usage {
                wall_us: step.us,
                cpu_us: (!is_llm).then_some(step.us / 2),
                input_tokens,
                output_tokens,
                tokens: None,
            },
            cost,
            worker: worker.clone(),
            input_summary: input.clone(),
            output_summary: format!("output of {}", step.node).into(),
        });
        let status = match (step.status, &step.role) {
            (SpanStatus::Ok, _) => NodeStatus::Succeeded,
            (SpanStatus::Timeout, _) => NodeStatus::FellBack,
            _ => NodeStatus::Failed,
        };
        nodes.push(PathNode {
            id: node.clone(),
            kind: step.kind.into(),
            status,
            start_us: Some(offset),
            end_us: Some(offset + step.us),
            duration_us: Some(step.us),
            attempts: 1,
            label: None,
            fallback: (status == NodeStatus::FellBack).then(|| "llm_small".into()),
            replaces: match &step.role {
                SpanRole::Fallback { replaces } => Some(replaces.clone()),
                _ => None,
            },
        });
        offset += step.us;
    }
    let edges = vec![
        PathEdge {
            from: "route".into(),
            to: "embed".into(),
            condition: Some("need_retrieval".into()),
            taken: req.retrieval,
            why: "router label".into(),
        },
        PathEdge {
            from: "route".into(),
            to: "prompt".into(),
            condition: Some("direct_answer".into()),
            taken: !req.retrieval,
            why: "router label".into(),
        },
        PathEdge {
            from: "embed".into(),
            to: "retrieve".into(),
            condition: None,
            taken: req.retrieval,
            why: "no condition".into(),
        },
        PathEdge {
            from: "retrieve".into(),
            to: "prompt".into(),
            condition: None,
            taken: req.retrieval,
            why: "no condition".into(),
        },
        PathEdge {
            from: "prompt".into(),
            to: "llm".into(),
            condition: None,
            taken: true,
            why: "no condition".into(),
        },
        PathEdge {
            from: "llm".into(),
            to: "validate".into(),
            condition: None,
            taken: true,
            why: "no condition".into(),
        },
    ];
    let error = req.failed.then(|| ErrorRecord {
        code: "guard_failed".into(),
        message: "`validate` failed: output failed 1 rule".into(),
        node: Some("validate".into()),
        attempt: Some(1),
        detail: None,
    });
    let mut facts = vec![NodeFacts {
        node: "route".into(),
        kind: "router".into(),
        facts: vec![Fact::Routed {
            label: if req.retrieval {
                "need_retrieval"
            } else {
                "direct_answer"
            }
            .into(),
            rule: None,
            reason: "default".into(),
        }],
    }];
    facts.push(NodeFacts {
        node: "llm".into(),
        kind: "llm_inference".into(),
        facts: vec![Fact::Generated {
            model: "chat-7b".into(),
            version: Some("3.2.1".into()),
            temperature: Some(0.2),
            output_tokens: Some(req.output_tokens),
        }],
    });
    let mut labels = BTreeMap::new();
    labels.insert(
        Arc::from("route"),
        if req.retrieval {
            "need_retrieval"
        } else {
            "direct_answer"
        }
        .to_string(),
    );
    let record = RequestRecord {
        request_id: req.id,
        topology_id: topology,
        version: req.version.as_str().into(),
        started_at_us: req.started_at_us,
        ended_at_us: req.started_at_us + offset,
        duration_us: offset,
        status: if req.failed {
            RequestStatus::Failed
        } else {
            RequestStatus::Ok
        },
        degraded: req.fallback,
        error,
        path: PathRecord {
            nodes,
            edges,
            loops: Vec::new(),
        },
        labels,
        models: vec![ModelUse {
            node: "llm".into(),
            model: "chat-7b".into(),
            version: Some("3.2.1".into()),
        }],
        // Cut as the engine cuts it; the record keeps the real length.
        input_summary: glassbox_trace::truncate(&req.input, 200),
        input_chars: Some(req.input.chars().count() as u64),
        input_tokens: None,
        output_summary: "the answer".into(),
        receipt,
        explanation: Explanation {
            lang: Lang::En,
            text: "Your question was routed to retrieval.".into(),
            facts,
        },
        worker,
        span_count: u32::try_from(spans.len()).unwrap_or(u32::MAX),
    };
    (record, spans)
}
