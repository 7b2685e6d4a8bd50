//! Validation: from a parsed spec to a resolved [`Topology`], or a list of
//! every problem found.
//!
//! Checks run in one pass over the whole file and never stop early: format
//! (decode), ids, node kinds and their configs, resource tags, edges,
//! conditions and labels, fallbacks, and the graph (cycles, entries,
//! reachability). Graph checks only consider edges whose ends exist, so one
//! typo yields one diagnostic, not a cascade.
//!
//! This module runs the checks and resolves the result; the checks
//! themselves are in `nodes`, `edges` and `graph`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::condition::Condition;
use crate::decode::Cx;
use crate::diagnostic::{Code, Diagnostic, Report};
use crate::kind::KindSet;
use crate::model::{
    CachePolicy, DEFAULT_BACKOFF, DEFAULT_CURRENCY, DEFAULT_TIMEOUT, Edge, Node, NodeId, Parts,
    Resource, Topology,
};
use crate::parse;
use crate::source::{Source, Span};
use crate::spec::{NodeSpec, TopologySpec};
use crate::typed_config::TypedConfig;

mod cache;
mod edges;
mod graph;
mod loops;
mod nodes;

/// Why a topology could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read `{path}`")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{}` is not a valid topology ({})", .0.source.name(), .0.summary())]
    Invalid(Box<Report>),
}

impl TopologyError {
    /// Stable code for APIs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            TopologyError::Io { .. } => "io",
            TopologyError::Invalid(_) => "invalid_topology",
        }
    }
}

/// A topology and the warnings found while validating it.
#[derive(Debug)]
pub struct Validated {
    pub topology: Topology,
    pub report: Report,
}

/// Reads and validates a topology file (`-` reads standard input).
pub fn load_path(path: &str, kinds: &KindSet) -> Result<Validated, TopologyError> {
    use std::io::Read;
    let bytes = if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|source| TopologyError::Io {
                path: path.into(),
                source,
            })?;
        buf
    } else {
        std::fs::read(path).map_err(|source| TopologyError::Io {
            path: path.into(),
            source,
        })?
    };
    let name = if path == "-" { "<stdin>" } else { path };
    let source = match parse::decode(name, bytes, None) {
        Ok(s) => s,
        Err(d) => {
            let source = Source::new(name, String::new());
            return Err(TopologyError::Invalid(Box::new(Report::new(
                source,
                vec![*d],
            ))));
        }
    };
    load_source(source, kinds)
}

/// Validates a topology held in memory, then runs the kinds' checks that
/// read files ([`KindSchema::inspect`](crate::KindSchema::inspect)).
pub fn load_source(source: Source, kinds: &KindSet) -> Result<Validated, TopologyError> {
    let (topology, mut diagnostics) = validate(&source, kinds);
    if let Some(t) = &topology {
        inspect(t, kinds, &mut diagnostics);
    }
    let report = Report::new(source, diagnostics);
    match topology {
        Some(topology) if !report.has_errors() => Ok(Validated { topology, report }),
        _ => Err(TopologyError::Invalid(Box::new(report))),
    }
}

/// Each node's I/O checks (see [`load_source`]), with its spanned config.
fn inspect(topology: &Topology, kinds: &KindSet, diags: &mut Vec<Diagnostic>) {
    let mut cx = Cx::new(diags);
    for (node, spec) in topology.nodes.iter().zip(&topology.spec.nodes) {
        if let Some(kind) = kinds.get(&node.kind) {
            let mut cx = cx.field(&format!("nodes[{}].config", spec.index));
            kind.inspect(node, spec.config_value.as_ref(), topology, &mut cx);
        }
    }
}

/// Validates a source, returning the topology (when there are no errors) and
/// every diagnostic, warnings included.
pub fn validate(source: &Source, kinds: &KindSet) -> (Option<Topology>, Vec<Diagnostic>) {
    let root = match parse::parse(source) {
        Ok(root) => root,
        Err(diags) => return (None, diags),
    };
    let mut diags = Vec::new();
    let spec = TopologySpec::decode(&root, &mut Cx::new(&mut diags));
    let topology = Checker {
        source,
        kinds,
        spec: &spec,
        diags: &mut diags,
        typed: Vec::new(),
    }
    .run();
    let has_errors = diags.iter().any(Diagnostic::is_error);
    (if has_errors { None } else { topology }, diags)
}

struct Checker<'a> {
    source: &'a Source,
    kinds: &'a KindSet,
    spec: &'a TopologySpec,
    diags: &'a mut Vec<Diagnostic>,
    /// Each node's config as its kind typed it (by position in `spec.nodes`).
    typed: Vec<Option<TypedConfig>>,
}

fn node_path(node: &NodeSpec, field: &str) -> String {
    if field.is_empty() {
        format!("nodes[{}]", node.index)
    } else {
        format!("nodes[{}].{field}", node.index)
    }
}

fn valid_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Checker<'_> {
    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn run(mut self) -> Option<Topology> {
        let spec = self.spec;
        if !spec.topology_id.value.is_empty()
            && !spec
                .topology_id
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        {
            self.push(
                Diagnostic::error(
                    Code::InvalidValue,
                    spec.topology_id.span,
                    format!(
                        "topology id `{}` has characters other than letters, digits, `.`, `_`, `-`",
                        spec.topology_id.value
                    ),
                )
                .at("topology_id")
                .hint("ids appear in URLs and file names; use e.g. `rag-chat`"),
            );
        }
        let index = self.check_ids();
        let labels = self.check_kinds();
        let resources = self.check_resources();
        let fallbacks = self.check_fallbacks(&index);
        let caches = self.check_caches(&index);
        let edges = self.check_edges(&index, &labels);
        let order = self.check_graph(&index, &edges, &fallbacks);
        let loops = self.check_loops(&edges, order.as_deref());

        let order = order?;
        let resources = resources?;
        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        let resolved = Resolved {
            edges,
            fallbacks,
            caches,
            resources,
            order,
            loops,
        };
        Some(self.resolve(index, resolved))
    }

    fn resolve(self, index: HashMap<String, NodeId>, r: Resolved) -> Topology {
        let Resolved {
            edges,
            fallbacks,
            mut caches,
            resources,
            order,
            loops,
        } = r;
        let spec = self.spec;
        let defaults = spec.defaults.clone().unwrap_or_default();
        let ms = |v: Option<u64>| v.map(Duration::from_millis);
        let is_fallback: HashSet<usize> = fallbacks.iter().flatten().map(|f| f.0).collect();
        let nodes = spec
            .nodes
            .iter()
            .zip(resources)
            .enumerate()
            .map(|(i, (n, resource))| Node {
                id: n.id.value.clone(),
                kind: n.kind.value.clone(),
                description: n.description.as_ref().map(|d| d.value.clone()),
                resource,
                config: serde_json::Value::Object(n.config.clone().unwrap_or_default()),
                typed_config: self.typed.get(i).cloned().flatten(),
                timeout: ms(n
                    .timeout_ms
                    .as_ref()
                    .or(defaults.timeout_ms.as_ref())
                    .map(|v| v.value))
                .unwrap_or(DEFAULT_TIMEOUT),
                retries: n
                    .retries
                    .as_ref()
                    .or(defaults.retries.as_ref())
                    .map_or(0, |v| v.value as u32),
                backoff: ms(n
                    .backoff_ms
                    .as_ref()
                    .or(defaults.backoff_ms.as_ref())
                    .map(|v| v.value))
                .unwrap_or(DEFAULT_BACKOFF),
                fallback: fallbacks[i],
                affinity: n.affinity.as_ref().map(|a| a.value.clone()),
                cache: caches.get_mut(i).and_then(Option::take),
                metadata: n
                    .metadata
                    .clone()
                    .map(|m| m.into_iter().collect())
                    .unwrap_or_default(),
                is_fallback: is_fallback.contains(&i),
            })
            .collect();
        let edges = edges
            .into_iter()
            .map(|e| Edge {
                from: e.from,
                to: e.to,
                condition: e.condition,
                description: e.description,
                bound: e.bound,
            })
            .collect();
        debug_assert_eq!(index.len(), spec.nodes.len());
        Topology::new(Parts {
            id: spec.topology_id.value.clone(),
            version: spec.version.value.clone(),
            description: spec.description.as_ref().map(|d| d.value.clone()),
            currency: spec
                .pricing
                .as_ref()
                .and_then(|p| p.currency.as_ref().map(|c| c.value.clone()))
                .unwrap_or_else(|| DEFAULT_CURRENCY.to_string()),
            deadline: ms(defaults.deadline_ms.as_ref().map(|v| v.value)),
            nodes,
            edges,
            metadata: spec
                .metadata
                .clone()
                .map(|m| m.into_iter().collect())
                .unwrap_or_default(),
            spec: spec.clone(),
            source_name: self.source.name().to_string(),
            order,
            loops,
        })
    }
}

/// What the checks resolved, for [`Checker::resolve`].
struct Resolved {
    edges: Vec<CheckedEdge>,
    fallbacks: Vec<Option<NodeId>>,
    caches: Vec<Option<CachePolicy>>,
    resources: Vec<Resource>,
    order: Vec<NodeId>,
    loops: Vec<crate::model::Loop>,
}

struct CheckedEdge {
    from: NodeId,
    to: NodeId,
    condition: Option<Condition>,
    spec_index: usize,
    span: Span,
    description: Option<String>,
    /// Set on a loop's back edge.
    bound: Option<crate::model::LoopBound>,
    /// Where the `loop` entry was written.
    bound_span: Option<Span>,
}

fn sorted<'a>(ids: &[&'a str]) -> Vec<&'a str> {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v
}
