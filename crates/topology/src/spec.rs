//! The topology format as written: every field, with its source span.
//!
//! These types are the single definition of the format: the decoder below
//! reads exactly their fields, `glassbox schema` derives the published JSON
//! Schema from them (doc comments become descriptions), and a test checks the
//! two agree. Nothing downstream uses them directly: [`crate::validate`]
//! turns a spec into a resolved [`crate::Topology`].

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;

use crate::decode::{Cx, Obj, Spanned};
use crate::value::Value;

pub use crate::edge_spec::{EdgeSpec, LoopSpec};

/// Limits for numeric fields (also in the schema and `docs/topology.md`).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
pub const MAX_RETRIES: u64 = 10;
pub const MAX_BACKOFF_MS: u64 = 60_000;
/// Longest a cached response may live: 30 days.
pub const MAX_CACHE_TTL_S: u64 = 2_592_000;
/// Most responses one node's cache may hold.
pub const MAX_CACHE_ENTRIES: u64 = 100_000;

/// A Glassbox topology: the nodes a request may pass through and the edges
/// between them. The concrete path is generated per request at run time.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(title = "Glassbox topology", deny_unknown_fields)]
pub struct TopologySpec {
    /// Stable identifier, e.g. `rag-chat`. Letters, digits, `.`, `_`, `-`.
    pub topology_id: Spanned<String>,
    /// Version of this topology, e.g. `3.2.1`. Traces and reports group by it.
    pub version: Spanned<String>,
    /// What the topology is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// Defaults applied to every node that does not set its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defaults: Option<DefaultsSpec>,
    /// Price table: currency, per-CPU-millisecond price and per-model prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pricing: Option<PricingSpec>,
    /// The computation units. At least one.
    pub nodes: Vec<NodeSpec>,
    /// Directed edges; a request flows along the edges whose condition holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeSpec>,
    /// Free-form data for your own tooling (owner, tags, links). Not interpreted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
}

/// Defaults for nodes and for the request as a whole.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DefaultsSpec {
    /// Per-attempt timeout of a node in milliseconds (1..=3600000). Default 30000.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Retries after a failed attempt (0..=10). Default 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub retries: Option<Spanned<u64>>,
    /// First retry delay in milliseconds; doubles each retry, with jitter (0..=60000). Default 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 60_000))]
    pub backoff_ms: Option<Spanned<u64>>,
    /// Deadline for the whole request in milliseconds (1..=3600000). Default: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub deadline_ms: Option<Spanned<u64>>,
}

/// Where prices come from when a node's resource tag does not set them.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PricingSpec {
    /// ISO 4217 currency of every price in this topology. Default `USD`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<Spanned<String>>,
    /// Price of one CPU-millisecond of thread CPU time, for CPU nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_cpu_ms: Option<Spanned<Decimal>>,
    /// Prices per model name (matched against `resource.model`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, PriceSpec>,
}

/// Prices that can be attached to a resource or a model.
#[derive(Debug, Clone, Default, Serialize, JsonSchema, PartialEq)]
#[schemars(deny_unknown_fields)]
pub struct PriceSpec {
    /// Fixed price of one call (one attempt).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_call: Option<Spanned<Decimal>>,
    /// Price per 1,000 tokens, input and output alike.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 input (prompt) tokens; overrides `cost_per_1k_tokens` for input.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_input_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 output (generated) tokens; overrides `cost_per_1k_tokens` for output.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_output_tokens: Option<Spanned<Decimal>>,
    /// Price per CPU-millisecond of thread CPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_cpu_ms: Option<Spanned<Decimal>>,
    /// Price per 1,000 prompt tokens served from the provider's prompt
    /// cache (OpenAI `cached_tokens`); default: the input price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_cached_input_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 prompt tokens written into the prompt cache
    /// (Anthropic `cache_creation_input_tokens`); default: the input price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_cache_creation_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 reasoning tokens (`reasoning_tokens`); default: the
    /// output price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_reasoning_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 audio prompt tokens; default: the input price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_audio_input_tokens: Option<Spanned<Decimal>>,
    /// Price per 1,000 audio generated tokens; default: the output price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<f64>", range(min = 0))]
    pub cost_per_1k_audio_output_tokens: Option<Spanned<Decimal>>,
}

/// What a node runs on, and what it costs.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ResourceSpec {
    /// `cpu` (costed in CPU-milliseconds) or `gpu` (costed in tokens).
    #[serde(rename = "type")]
    #[schemars(with = "ResourceType")]
    pub kind: Spanned<String>,
    /// Model name; required for `gpu` nodes. Used for per-model prices and reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Spanned<String>>,
    #[serde(flatten)]
    pub prices: PriceSpec,
}

/// Resource types.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResourceType {
    Cpu,
    Gpu,
}

/// One computation unit.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique id within the topology; conditions refer to it as `outputs.<id>`.
    pub id: Spanned<String>,
    /// Node kind: router, embedding, vector_search, template, llm_inference,
    /// output_guard, http, ... (see `glassbox validate --list-kinds`).
    #[serde(rename = "type")]
    pub kind: Spanned<String>,
    /// What the node does, for people reading the topology or a trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<String>>,
    /// Resource tag. Default `{type: cpu}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceSpec>,
    /// Kind-specific configuration, checked by the node kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
    /// Per-attempt timeout in milliseconds (1..=3600000).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3_600_000))]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Retries after a failed attempt (0..=10).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub retries: Option<Spanned<u64>>,
    /// First retry delay in milliseconds (0..=60000); doubles per retry, with jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 60_000))]
    pub backoff_ms: Option<Spanned<u64>>,
    /// Node that replaces this one when it fails or times out after its
    /// retries (the degraded path). It must have no edges of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Spanned<String>>,
    /// Placement group: nodes sharing a group run on the same worker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Spanned<String>>,
    /// Response cache: serve a repeated request from the node's earlier
    /// output instead of calling it again (exact match, optionally by
    /// embedding similarity), with a TTL and a size bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSpec>,
    /// Free-form data for your own tooling. Not interpreted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
    /// The raw `config` value, for the node kind's own checks.
    #[serde(skip)]
    #[schemars(skip)]
    pub config_value: Option<Value>,
    /// Span of the whole node entry.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: crate::source::Span,
    /// Position in the `nodes` list as written.
    #[serde(skip)]
    #[schemars(skip)]
    pub index: usize,
}

/// A node's response cache.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CacheSpec {
    /// How long a stored response is served, in seconds (1..=2592000). Default 3600.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2_592_000))]
    pub ttl_s: Option<Spanned<u64>>,
    /// Most responses kept; the least recently used goes first (1..=100000). Default 1000.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub max_entries: Option<Spanned<u64>>,
    /// Also serve a request whose text is close enough to a cached one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<SimilaritySpec>,
    /// Span of the whole `cache` entry.
    #[serde(skip)]
    #[schemars(skip)]
    pub span: crate::source::Span,
}

/// Similarity matching for a response cache.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SimilaritySpec {
    /// Id of an `embedding` node in this topology: its model embeds the text.
    pub embedding: Spanned<String>,
    /// Least cosine similarity that counts as the same request (0..=1), e.g. 0.95.
    #[schemars(range(min = 0, max = 1))]
    pub threshold: Spanned<f64>,
    /// What to compare (CEL over `input`, `outputs`, `labels`). Default `input.question`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Spanned<String>>,
}

pub(crate) const TOPOLOGY_FIELDS: &[&str] = &[
    "topology_id",
    "version",
    "description",
    "defaults",
    "pricing",
    "nodes",
    "edges",
    "metadata",
];
pub(crate) const DEFAULTS_FIELDS: &[&str] = &["timeout_ms", "retries", "backoff_ms", "deadline_ms"];
pub(crate) const PRICING_FIELDS: &[&str] = &["currency", "cost_per_cpu_ms", "models"];
pub(crate) const PRICE_FIELDS: &[&str] = &[
    "cost_per_call",
    "cost_per_1k_tokens",
    "cost_per_1k_input_tokens",
    "cost_per_1k_output_tokens",
    "cost_per_cpu_ms",
    "cost_per_1k_cached_input_tokens",
    "cost_per_1k_cache_creation_tokens",
    "cost_per_1k_reasoning_tokens",
    "cost_per_1k_audio_input_tokens",
    "cost_per_1k_audio_output_tokens",
];
pub(crate) const RESOURCE_FIELDS: &[&str] = &[
    "type",
    "model",
    "cost_per_call",
    "cost_per_1k_tokens",
    "cost_per_1k_input_tokens",
    "cost_per_1k_output_tokens",
    "cost_per_cpu_ms",
    "cost_per_1k_cached_input_tokens",
    "cost_per_1k_cache_creation_tokens",
    "cost_per_1k_reasoning_tokens",
    "cost_per_1k_audio_input_tokens",
    "cost_per_1k_audio_output_tokens",
];
pub(crate) const NODE_FIELDS: &[&str] = &[
    "id",
    "type",
    "description",
    "resource",
    "config",
    "timeout_ms",
    "retries",
    "backoff_ms",
    "fallback",
    "affinity",
    "cache",
    "metadata",
];
pub(crate) const CACHE_FIELDS: &[&str] = &["ttl_s", "max_entries", "similarity"];
pub(crate) const SIMILARITY_FIELDS: &[&str] = &["embedding", "threshold", "text"];

fn free_map(
    obj: &Obj<'_>,
    cx: &mut Cx<'_>,
    name: &str,
) -> Option<BTreeMap<String, serde_json::Value>> {
    let o = obj.obj(cx, name)?;
    Some(
        o.map
            .iter()
            .map(|(k, v)| (k.name.clone(), v.to_json()))
            .collect(),
    )
}

impl TopologySpec {
    /// Reads a spec from a parsed document, reporting every problem into `cx`.
    pub fn decode(root: &Value, cx: &mut Cx<'_>) -> TopologySpec {
        let mut spec = TopologySpec::default();
        let Some(obj) = Obj::expect(root, cx, "a topology") else {
            return spec;
        };
        obj.deny_unknown(cx, TOPOLOGY_FIELDS);
        let id_hint = "name the topology, e.g. `topology_id: rag-chat`";
        spec.topology_id = obj.req_str(cx, "topology_id", id_hint).unwrap_or_default();
        spec.version = obj
            .req_str(cx, "version", "version the topology, e.g. `version: 1.0.0`")
            .unwrap_or_default();
        spec.description = obj.str(cx, "description");
        spec.defaults = obj
            .obj(cx, "defaults")
            .map(|o| DefaultsSpec::decode(o, &mut cx.field("defaults")));
        spec.pricing = obj
            .obj(cx, "pricing")
            .map(|o| PricingSpec::decode(o, &mut cx.field("pricing")));
        spec.metadata = free_map(&obj, cx, "metadata");
        match obj.seq(cx, "nodes") {
            None if obj.get("nodes").is_none() => obj.missing(
                cx,
                "nodes",
                "declare at least one node: `nodes: [{id: ..., type: ...}]`",
            ),
            None => {}
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    let mut ncx = cx.field(&format!("nodes[{i}]"));
                    if let Some(node) = NodeSpec::decode(item, i, &mut ncx) {
                        spec.nodes.push(node);
                    }
                }
                if items.is_empty() {
                    let span = obj.get("nodes").map_or(obj.span, |v| v.span);
                    cx.error(
                        crate::Code::InvalidValue,
                        span,
                        "`nodes` is empty",
                        "a topology needs at least one node",
                    );
                }
            }
        }
        if let Some(items) = obj.seq(cx, "edges") {
            for (i, item) in items.iter().enumerate() {
                let mut ecx = cx.field(&format!("edges[{i}]"));
                if let Some(edge) = EdgeSpec::decode(item, i, &mut ecx) {
                    spec.edges.push(edge);
                }
            }
        }
        spec
    }
}

impl DefaultsSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> DefaultsSpec {
        obj.deny_unknown(cx, DEFAULTS_FIELDS);
        DefaultsSpec {
            timeout_ms: obj.uint(cx, "timeout_ms", 1, MAX_TIMEOUT_MS),
            retries: obj.uint(cx, "retries", 0, MAX_RETRIES),
            backoff_ms: obj.uint(cx, "backoff_ms", 0, MAX_BACKOFF_MS),
            deadline_ms: obj.uint(cx, "deadline_ms", 1, MAX_TIMEOUT_MS),
        }
    }
}

impl PricingSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> PricingSpec {
        obj.deny_unknown(cx, PRICING_FIELDS);
        let currency = obj.str(cx, "currency");
        if let Some(c) = &currency
            && (c.value.len() != 3 || !c.value.chars().all(|ch| ch.is_ascii_uppercase()))
        {
            cx.report(
                crate::Diagnostic::error(
                    crate::Code::InvalidValue,
                    c.span,
                    format!("currency `{}` is not a three-letter ISO 4217 code", c.value),
                )
                .at(cx.path_of("currency"))
                .hint("write e.g. `USD`, `EUR` or `CNY`"),
            );
        }
        let mut models = BTreeMap::new();
        if let Some(m) = obj.obj(cx, "models") {
            for (key, value) in m.map.iter() {
                let mut mcx = cx.field(&format!("models.{}", key.name));
                if let Some(o) = Obj::expect(value, &mut mcx, "a model price") {
                    o.deny_unknown(&mut mcx, PRICE_FIELDS);
                    models.insert(key.name.clone(), PriceSpec::decode(o, &mut mcx));
                }
            }
        }
        PricingSpec {
            currency,
            cost_per_cpu_ms: obj.price(cx, "cost_per_cpu_ms"),
            models,
        }
    }
}

impl PriceSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> PriceSpec {
        PriceSpec {
            cost_per_call: obj.price(cx, "cost_per_call"),
            cost_per_1k_tokens: obj.price(cx, "cost_per_1k_tokens"),
            cost_per_1k_input_tokens: obj.price(cx, "cost_per_1k_input_tokens"),
            cost_per_1k_output_tokens: obj.price(cx, "cost_per_1k_output_tokens"),
            cost_per_cpu_ms: obj.price(cx, "cost_per_cpu_ms"),
            cost_per_1k_cached_input_tokens: obj.price(cx, "cost_per_1k_cached_input_tokens"),
            cost_per_1k_cache_creation_tokens: obj.price(cx, "cost_per_1k_cache_creation_tokens"),
            cost_per_1k_reasoning_tokens: obj.price(cx, "cost_per_1k_reasoning_tokens"),
            cost_per_1k_audio_input_tokens: obj.price(cx, "cost_per_1k_audio_input_tokens"),
            cost_per_1k_audio_output_tokens: obj.price(cx, "cost_per_1k_audio_output_tokens"),
        }
    }
}

impl ResourceSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> Option<ResourceSpec> {
        obj.deny_unknown(cx, RESOURCE_FIELDS);
        let kind = obj.req_str(cx, "type", "set `type: cpu` or `type: gpu`");
        let model = obj.str(cx, "model");
        let prices = PriceSpec::decode(obj, cx);
        Some(ResourceSpec {
            kind: kind?,
            model,
            prices,
        })
    }
}

impl NodeSpec {
    fn decode(value: &Value, index: usize, cx: &mut Cx<'_>) -> Option<NodeSpec> {
        let obj = Obj::expect(value, cx, "a node")?;
        obj.deny_unknown(cx, NODE_FIELDS);
        let id = obj.req_str(cx, "id", "give every node a unique `id`");
        let kind = obj.req_str(cx, "type", "set the node kind, e.g. `type: llm_inference`");
        let resource = obj
            .obj(cx, "resource")
            .and_then(|o| ResourceSpec::decode(o, &mut cx.field("resource")));
        let config_value = obj.get("config").cloned();
        let config = match &config_value {
            Some(v) if v.as_map().is_some() => v.to_json().as_object().cloned(),
            Some(v) if matches!(v.kind, crate::value::Kind::Null) => None,
            Some(v) => {
                cx.report(
                    crate::Diagnostic::error(
                        crate::Code::WrongType,
                        v.span,
                        format!("`config` must be a map, found {}", v.type_name()),
                    )
                    .at(cx.path_of("config"))
                    .hint("write `config` as `key: value` pairs for the node kind"),
                );
                None
            }
            None => None,
        };
        let node = NodeSpec {
            id: id.unwrap_or_else(|| Spanned::new(String::new(), obj.key_span("id"))),
            kind: kind.unwrap_or_else(|| Spanned::new(String::new(), obj.key_span("type"))),
            description: obj.str(cx, "description"),
            resource,
            config,
            timeout_ms: obj.uint(cx, "timeout_ms", 1, MAX_TIMEOUT_MS),
            retries: obj.uint(cx, "retries", 0, MAX_RETRIES),
            backoff_ms: obj.uint(cx, "backoff_ms", 0, MAX_BACKOFF_MS),
            fallback: obj.str(cx, "fallback"),
            affinity: obj.str(cx, "affinity"),
            cache: obj
                .obj(cx, "cache")
                .map(|o| CacheSpec::decode(o, &mut cx.field("cache"))),
            metadata: free_map(&obj, cx, "metadata"),
            config_value,
            span: value.span,
            index,
        };
        Some(node)
    }
}

impl CacheSpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> CacheSpec {
        obj.deny_unknown(cx, CACHE_FIELDS);
        CacheSpec {
            ttl_s: obj.uint(cx, "ttl_s", 1, MAX_CACHE_TTL_S),
            max_entries: obj.uint(cx, "max_entries", 1, MAX_CACHE_ENTRIES),
            similarity: obj
                .obj(cx, "similarity")
                .and_then(|o| SimilaritySpec::decode(o, &mut cx.field("similarity"))),
            span: obj.span,
        }
    }
}

impl SimilaritySpec {
    fn decode(obj: Obj<'_>, cx: &mut Cx<'_>) -> Option<SimilaritySpec> {
        obj.deny_unknown(cx, SIMILARITY_FIELDS);
        let embedding = obj.req_str(
            cx,
            "embedding",
            "name the `embedding` node whose model compares texts, e.g. `embedding: embed`",
        );
        let threshold = obj.number(cx, "threshold", 0.0, 1.0);
        if threshold.is_none() && obj.get("threshold").is_none() {
            obj.missing(
                cx,
                "threshold",
                "set the least cosine similarity that counts as a repeat, e.g. `threshold: 0.95`",
            );
        }
        // A missing or bad field was reported; the rest is still checked
        // (the topology is not built with errors, so the defaults never run).
        Some(SimilaritySpec {
            embedding: embedding.unwrap_or_else(|| Spanned::new(String::new(), obj.span)),
            threshold: threshold.unwrap_or_else(|| Spanned::new(1.0, obj.span)),
            text: obj.str(cx, "text"),
        })
    }
}
