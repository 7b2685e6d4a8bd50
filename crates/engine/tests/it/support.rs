//! Test-only node kinds and helpers.
//!
//! One kind, `test`, configured per node:
//! - `value`: the output value (default `{"node": <id>}`)
//! - `label`: a label to emit; `label_from`: emit `input.<field>` as label
//! - `sleep_ms`: async work taking this long (virtual time under pause)
//! - `hang`: never finishes
//! - `fail_times`: fail (retryable) on attempts up to this number
//! - `bad_input`: fail, not retryable
//! - `blocking`: run on the blocking pool
//! - `tokens`: `[input, output]` token usage
//! - `steps`: `[{kind, name, iteration, tokens: [in, out], cost, error}]`:
//!   steps inside the attempt (as an agent's model and tool calls)
//! - `tell_steps`: the same, told to the engine as they finish
//!   (`NodeCx::step_done`) before the attempt's work (e.g. `hang`)
//! - `rerun`: `{upstream, until}`: ask for `upstream` to re-run until its
//!   output's `n` reaches `until`
//! - `count`: output `{"n": <calls so far>}` (a counter per node)
//! - `worker`: name this worker for the attempt's span (`NodeCx::set_worker`)
//! - `keep_cx`: keep each attempt's context in [`KEPT`], with whether the
//!   attempt was already over when the node was called, and its time left
//!   then in [`LEFT`]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use glassbox_engine::trace::{Fact, MemorySink};
use glassbox_engine::{
    BuildContext, BuildError, Call, Node, NodeCx, NodeError, NodeOutput, Pipeline, PipelineOptions,
    Registry, TypedKind,
};
use glassbox_topology::{Cx, Labels, Source, Value as Spanned};
use serde_json::{Value, json};

pub struct TestKind;

/// Contexts kept by `keep_cx` nodes: (node id, context, over when called).
pub static KEPT: Mutex<Vec<(String, NodeCx, bool)>> = Mutex::new(Vec::new());

/// `NodeCx::time_left` of `keep_cx` nodes when called: (node id, left).
pub static LEFT: Mutex<Vec<(String, Option<Duration>)>> = Mutex::new(Vec::new());

impl TypedKind for TestKind {
    type Config = ();

    fn name(&self) -> &'static str {
        "test"
    }
    fn summary(&self) -> &'static str {
        "test-only node"
    }
    fn check(&self, _config: Option<&Spanned>, _cx: &mut Cx<'_>) {}
    fn labels(&self, _config: &()) -> Labels {
        Labels::Dynamic
    }

    fn build(
        &self,
        _config: &(),
        node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Ok(Arc::new(TestNode {
            config: node.config.clone(),
            id: node.id.clone(),
            calls: AtomicU32::new(0),
        }))
    }
}

struct TestNode {
    config: Value,
    id: String,
    calls: AtomicU32,
}

impl TestNode {
    fn output(&self, cx: &NodeCx, n: u32) -> Result<NodeOutput, NodeError> {
        let c = &self.config;
        if c["bad_input"].as_bool() == Some(true) {
            return Err(NodeError::BadInput("input is not acceptable".into()));
        }
        if let Some(times) = c["fail_times"].as_u64()
            && u64::from(cx.attempt()) <= times
        {
            return Err(NodeError::Unavailable(format!(
                "flaky dependency (attempt {})",
                cx.attempt()
            )));
        }
        if let Some(rerun) = c.get("rerun") {
            let upstream = rerun["upstream"].as_str().unwrap_or_default();
            let until = rerun["until"].as_u64().unwrap_or(0);
            let got = cx
                .output(upstream)
                .and_then(|o| o.value["n"].as_u64())
                .unwrap_or(0);
            if got < until {
                return Err(NodeError::RerunUpstream {
                    upstream: upstream.to_string(),
                    reason: format!("n = {got} < {until}"),
                });
            }
        }
        let value = if c["count"].as_bool() == Some(true) {
            json!({ "n": n })
        } else {
            c.get("value")
                .cloned()
                .unwrap_or_else(|| json!({ "node": self.id }))
        };
        let mut out = NodeOutput::new(value);
        if let Some(l) = c["label"].as_str() {
            out = out.label(l).fact(Fact::Routed {
                label: l.into(),
                rule: Some(format!("rule_{l}")),
                reason: String::new(),
            });
        }
        if let Some(field) = c["label_from"].as_str()
            && let Some(l) = cx.input()[field].as_str()
        {
            out = out.label(l);
        }
        if let Some(t) = c["tokens"].as_array() {
            out = out.tokens(t[0].as_u64().unwrap_or(0), t[1].as_u64().unwrap_or(0));
        }
        for s in c["steps"].as_array().into_iter().flatten() {
            out = out.step(step(s));
        }
        Ok(out)
    }
}

/// A step as the `steps` and `tell_steps` configs write it.
fn step(s: &Value) -> glassbox_engine::Step {
    let now = std::time::Instant::now();
    glassbox_engine::Step {
        kind: if s["kind"] == "tool" { "tool" } else { "model" },
        name: s["name"].as_str().unwrap_or_default().to_string(),
        iteration: s["iteration"].as_u64().unwrap_or(1) as u32,
        started: now,
        ended: now,
        input: s["input"].clone(),
        output: s["output"].clone(),
        error: s["error"].as_str().map(str::to_string),
        tokens: s["tokens"]
            .as_array()
            .map(|t| (t[0].as_u64().unwrap_or(0), t[1].as_u64().unwrap_or(0))),
        cost: s["cost"]
            .as_str()
            .map(|c| c.parse::<rust_decimal::Decimal>().unwrap()),
    }
}

impl Node for TestNode {
    fn call(&self, cx: NodeCx) -> Call {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let c = &self.config;
        if let Some(w) = c["worker"].as_str() {
            cx.set_worker(w);
        }
        if c["keep_cx"].as_bool() == Some(true) {
            let over = cx.attempt_over();
            LEFT.lock().unwrap().push((self.id.clone(), cx.time_left()));
            KEPT.lock()
                .unwrap()
                .push((self.id.clone(), cx.clone(), over));
        }
        for s in c["tell_steps"].as_array().into_iter().flatten() {
            cx.step_done(step(s));
        }
        if c["hang"].as_bool() == Some(true) {
            return Call::future(async {
                std::future::pending::<()>().await;
                Err(NodeError::failed("unreachable"))
            });
        }
        let result = self.output(&cx, n);
        if let Some(ms) = c["sleep_ms"].as_u64() {
            return Call::future(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                result
            });
        }
        if c["blocking"].as_bool() == Some(true) {
            return Call::blocking(move || result);
        }
        Call::Ready(result)
    }
}

/// `test_embed`: a test-only embedding kind. Its vector for a text counts
/// each letter (case-insensitive), so texts with the same letters embed
/// alike whatever their punctuation; its output is `{"vector": ...}`.
pub struct TestEmbedKind;

impl TypedKind for TestEmbedKind {
    type Config = ();

    fn name(&self) -> &'static str {
        "test_embed"
    }
    fn summary(&self) -> &'static str {
        "test-only embedding by letter counts"
    }
    fn check(&self, _config: Option<&Spanned>, _cx: &mut Cx<'_>) {}
    fn embeds(&self) -> bool {
        true
    }

    fn build(
        &self,
        _config: &(),
        _node: &glassbox_topology::Node,
        _cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        Ok(Arc::new(TestEmbedNode))
    }
}

struct TestEmbedNode;

pub fn letters(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; 26];
    for c in text.chars().filter(char::is_ascii_alphabetic) {
        v[(c.to_ascii_lowercase() as u8 - b'a') as usize] += 1.0;
    }
    v
}

impl Node for TestEmbedNode {
    fn call(&self, cx: NodeCx) -> Call {
        let text = cx.input()["question"].as_str().unwrap_or_default();
        Call::Ready(Ok(NodeOutput::new(json!({ "vector": letters(text) }))))
    }

    fn embed(&self, text: &str) -> Option<Result<Vec<f32>, NodeError>> {
        Some(Ok(letters(text)))
    }
}

pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(TestKind);
    r.add(TestEmbedKind);
    r
}

/// Builds a pipeline from YAML with the test kind and an in-memory sink.
pub fn pipeline(yaml: &str) -> (Pipeline, Arc<MemorySink>) {
    let registry = registry();
    let validated = match glassbox_topology::load_source(
        Source::new("test.yaml", yaml),
        &registry.kind_set(),
    ) {
        Ok(v) => v,
        Err(glassbox_topology::TopologyError::Invalid(report)) => {
            panic!("{}", report.render(false))
        }
        Err(e) => panic!("{e}"),
    };
    let topology = Arc::new(validated.topology);
    let sink = Arc::new(MemorySink::new());
    let options = PipelineOptions {
        sink: sink.clone(),
        ..PipelineOptions::default()
    };
    let cx = BuildContext::new(topology.clone());
    let p = Pipeline::build(topology, &registry, &cx, options).unwrap();
    (p, sink)
}

/// Builds the pipeline and runs it once, on `{}` with the default options.
pub async fn run_once(yaml: &str) -> glassbox_engine::Outcome {
    let (p, _sink) = pipeline(yaml);
    p.run(
        serde_json::json!({}),
        glassbox_engine::RunOptions::default(),
    )
    .await
}

/// Status of a node in a record's path, as a string.
pub fn status(record: &glassbox_engine::trace::RequestRecord, node: &str) -> &'static str {
    record
        .path
        .node(node)
        .map(|n| n.status.as_str())
        .unwrap_or("missing")
}
