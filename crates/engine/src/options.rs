//! Options: how a pipeline records its work ([`PipelineOptions`], fixed at
//! build) and what one request asks for ([`RunOptions`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use glassbox_topology::Prices;
use glassbox_trace::{Lang, NodeFacts, NoopSink, Priority, RequestId, TraceSink};
use tokio_util::sync::CancellationToken;

use crate::cpu::CpuClock;
use crate::stream::TokenSink;

/// How a pipeline records and labels its work.
#[derive(Clone)]
pub struct PipelineOptions {
    /// Where spans and request records go as they finish.
    pub sink: Arc<dyn TraceSink>,
    /// Name of this worker in spans.
    pub worker: Arc<str>,
    /// Longest input/output summary kept in traces (0: none).
    pub summary_chars: usize,
    /// How inline calls and async polls are timed for CPU billing.
    pub cpu_clock: CpuClock,
    /// Node id → prices that replace the topology's for that node (a
    /// calibration file's measured `cost_per_call`, see [`crate::calibration`]).
    pub prices: BTreeMap<String, Prices>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            sink: Arc::new(NoopSink),
            worker: "local".into(),
            summary_chars: 200,
            cpu_clock: CpuClock::default(),
            prices: BTreeMap::new(),
        }
    }
}

/// Per-request options.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Use this id instead of a fresh one.
    pub request_id: Option<RequestId>,
    /// Overrides the topology's `deadline_ms`.
    pub deadline: Option<Duration>,
    /// Cancels the request when triggered (dropping the future works too).
    pub cancel: Option<CancellationToken>,
    /// Language of the explanation.
    pub lang: Lang,
    /// Receives generated text as nodes produce it (token streaming).
    pub tokens: Option<TokenSink>,
    /// With `tokens`: the nodes whose text the caller shows as it comes
    /// (a server's live nodes); the others get no token stream, so a model
    /// engine knows nobody watches their pace. `None`: every node streams.
    pub live_nodes: Option<Vec<String>>,
    /// Facts about the request as a whole, told before the nodes' in its
    /// explanation (e.g. which topology version served it, and why).
    pub facts: Vec<NodeFacts>,
    /// The request's priority band: nodes hand it to the model engines
    /// they call ([`NodeCx::priority`](crate::NodeCx::priority)), so a
    /// local LLM admits waiting online requests before offline ones and
    /// preempts offline ones first; spans of a band other than `online`
    /// carry a `priority` tag.
    pub priority: Priority,
    /// The caller's cap on the tokens each model call may generate (the
    /// OpenAI API's `max_tokens`): an LLM node generates at most the
    /// smaller of this and its own `max_tokens`
    /// ([`NodeCx::max_tokens`](crate::NodeCx::max_tokens)).
    pub max_tokens: Option<u64>,
    /// What the caller asked of the model calls beyond text: tools to
    /// call and the shape of the answer (the OpenAI API's `tools`,
    /// `tool_choice` and `response_format`). LLM nodes that set none of
    /// their own use these ([`NodeCx::model_ask`](crate::NodeCx::model_ask)).
    pub model_ask: Option<Arc<ModelAsk>>,
}

/// Tools and answer format a caller asks of a request's model calls, in
/// the OpenAI API's shapes (checked by the LLM node that uses them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelAsk {
    /// `[{"type": "function", "function": {"name", "description", "parameters"}}]`.
    pub tools: Option<serde_json::Value>,
    /// `"auto"`, `"none"`, `"required"` or `{"type": "function", "function": {"name"}}`.
    pub tool_choice: Option<serde_json::Value>,
    /// `{"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema"}}`.
    pub response_format: Option<serde_json::Value>,
}

impl ModelAsk {
    /// Whether it asks for anything.
    pub fn is_empty(&self) -> bool {
        self.tools.is_none() && self.tool_choice.is_none() && self.response_format.is_none()
    }
}
