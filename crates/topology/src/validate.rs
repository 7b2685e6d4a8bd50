//! Validation: from a parsed spec to a resolved [`Topology`], or a list of
//! every problem found.
//!
//! Checks run in one pass over the whole file and never stop early: format
//! (decode), ids, node kinds and their configs, resource tags, edges,
//! conditions and labels, fallbacks, and the graph (cycles, entries,
//! reachability). Graph checks only consider edges whose ends exist, so one
//! typo yields one diagnostic, not a cascade.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use crate::condition::{Condition, VARIABLES};
use crate::decode::Cx;
use crate::diagnostic::{Code, Diagnostic, Report, did_you_mean};
use crate::kind::{KindSet, Labels, TypedConfig};
use crate::model::{
    DEFAULT_BACKOFF, DEFAULT_CURRENCY, DEFAULT_TIMEOUT, Edge, Node, NodeId, Parts, Prices,
    Resource, ResourceKind, Topology,
};
use crate::parse;
use crate::source::{Source, Span};
use crate::spec::{NodeSpec, PriceSpec, TopologySpec};

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

/// Validates a topology held in memory.
pub fn load_source(source: Source, kinds: &KindSet) -> Result<Validated, TopologyError> {
    let (topology, diagnostics) = validate(&source, kinds);
    let report = Report::new(source, diagnostics);
    match topology {
        Some(topology) if !report.has_errors() => Ok(Validated { topology, report }),
        _ => Err(TopologyError::Invalid(Box::new(report))),
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
        let edges = self.check_edges(&index, &labels);
        let order = self.check_graph(&index, &edges, &fallbacks);

        let order = order?;
        let resources = resources?;
        if self.diags.iter().any(Diagnostic::is_error) {
            return None;
        }
        Some(self.resolve(index, edges, fallbacks, resources, order))
    }

    /// Unique, well-formed node ids. Returns id → position in `spec.nodes`.
    fn check_ids(&mut self) -> HashMap<String, NodeId> {
        let mut index: HashMap<String, NodeId> = HashMap::new();
        for (i, node) in self.spec.nodes.iter().enumerate() {
            let id = &node.id;
            if id.value.is_empty() {
                continue;
            }
            if !valid_ident(&id.value) {
                self.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        id.span,
                        format!("node id `{}` is not an identifier", id.value),
                    )
                    .at(node_path(node, "id"))
                    .hint("start with a letter or `_`, then letters, digits, `_` or `-`, so conditions can say `outputs.<id>`"),
                );
            }
            if let Some(&first) = index.get(&id.value) {
                let first_span = self.spec.nodes[first.0].id.span;
                self.push(
                    Diagnostic::error(
                        Code::DuplicateId,
                        id.span,
                        format!("node id `{}` is used twice", id.value),
                    )
                    .at(node_path(node, "id"))
                    .related(first_span, "first used here")
                    .hint("node ids must be unique; rename one of them"),
                );
            } else {
                index.insert(id.value.clone(), NodeId(i));
            }
        }
        index
    }

    /// Known kinds and their configs. Returns the labels each node can emit
    /// and keeps each typed config for [`Node::typed_config`].
    fn check_kinds(&mut self) -> Vec<Labels> {
        let mut out = Vec::with_capacity(self.spec.nodes.len());
        for node in &self.spec.nodes {
            self.typed.push(None);
            let kind = &node.kind;
            let Some(schema) = self.kinds.get(&kind.value) else {
                if !kind.value.is_empty() {
                    let known: Vec<&str> = self.kinds.names().collect();
                    let mut hint = format!("known kinds: {}", known.join(", "));
                    if let Some(m) = did_you_mean(&kind.value, known.iter().copied()) {
                        hint = format!("{m} ({hint})");
                    }
                    self.push(
                        Diagnostic::error(
                            Code::UnknownKind,
                            kind.span,
                            format!("unknown node type `{}`", kind.value),
                        )
                        .at(node_path(node, "type"))
                        .hint(hint),
                    );
                }
                out.push(Labels::Dynamic);
                continue;
            };
            // A `config` that is not a map was already reported by the decoder.
            if node.config_value.as_ref().is_some_and(|v| {
                v.as_map().is_none() && !matches!(v.kind, crate::value::Kind::Null)
            }) {
                out.push(Labels::Dynamic);
                continue;
            }
            let before = self.diags.len();
            let mut cx = Cx::new(self.diags);
            let mut cx = cx.field(&node_path(node, "config"));
            let checked = schema.check(node.config_value.as_ref(), &mut cx);
            if let Some(v) = node.config_value.as_ref() {
                check_references(v, &node_path(node, "config"), self.diags);
            }
            // A kind that forgot to give a span gets the node's `config` (or the node).
            let fallback_span = node
                .config_value
                .as_ref()
                .map_or(node.kind.span, |v| v.span);
            for d in &mut self.diags[before..] {
                if d.span.is_none() {
                    d.span = Some(fallback_span);
                }
            }
            // Secret references are resolved at build time, on a copy the
            // kind types then; a typed value holding the references would be wrong.
            let has_secrets = node
                .config
                .as_ref()
                .is_some_and(|c| c.values().any(crate::secret::holds_reference));
            if let Some(slot) = self.typed.last_mut()
                && !has_secrets
            {
                *slot = checked.config;
            }
            out.push(checked.labels);
        }
        out
    }

    fn check_resources(&mut self) -> Option<Vec<Resource>> {
        let pricing = self.spec.pricing.clone().unwrap_or_default();
        let mut out = Vec::new();
        let mut ok = true;
        for node in &self.spec.nodes {
            let Some(res) = &node.resource else {
                out.push(Resource {
                    kind: ResourceKind::Cpu,
                    model: None,
                    prices: merge_prices(
                        &PriceSpec::default(),
                        None,
                        pricing.cost_per_cpu_ms.as_ref().map(|d| d.value),
                    ),
                });
                continue;
            };
            let kind = match res.kind.value.as_str() {
                "cpu" => ResourceKind::Cpu,
                "gpu" => ResourceKind::Gpu,
                other => {
                    let hint = did_you_mean(other, ["cpu", "gpu"]).map_or_else(
                        || "resource `type` is `cpu` or `gpu`".to_string(),
                        |m| format!("{m} (resource `type` is `cpu` or `gpu`)"),
                    );
                    self.push(
                        Diagnostic::error(
                            Code::BadResource,
                            res.kind.span,
                            format!("unknown resource type `{other}`"),
                        )
                        .at(node_path(node, "resource.type"))
                        .hint(hint),
                    );
                    ok = false;
                    continue;
                }
            };
            if kind == ResourceKind::Gpu
                && res.model.as_ref().is_none_or(|m| m.value.trim().is_empty())
            {
                self.push(
                    Diagnostic::error(
                        Code::BadResource,
                        res.kind.span,
                        format!("node `{}` runs on a gpu but names no model", node.id.value),
                    )
                    .at(node_path(node, "resource.model"))
                    .hint("add `model: <name>` to the resource tag; GPU costs and reports are per model"),
                );
                ok = false;
                continue;
            }
            let model_prices = res
                .model
                .as_ref()
                .and_then(|m| pricing.models.get(&m.value));
            out.push(Resource {
                kind,
                model: res.model.as_ref().map(|m| m.value.clone()),
                prices: merge_prices(
                    &res.prices,
                    model_prices,
                    pricing.cost_per_cpu_ms.as_ref().map(|d| d.value),
                ),
            });
        }
        ok.then_some(out)
    }

    /// Fallback targets exist, are not the node itself, have no edges, and
    /// do not chain back into a cycle.
    fn check_fallbacks(&mut self, index: &HashMap<String, NodeId>) -> Vec<Option<NodeId>> {
        let nodes = &self.spec.nodes;
        let mut targets = vec![None; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            let Some(fb) = &node.fallback else { continue };
            match index.get(&fb.value) {
                None => {
                    let hint = did_you_mean(&fb.value, index.keys().map(String::as_str))
                        .unwrap_or_else(|| {
                            "the fallback must be the id of another node in this topology".into()
                        });
                    self.push(
                        Diagnostic::error(
                            Code::UnknownFallback,
                            fb.span,
                            format!("fallback `{}` is not a node", fb.value),
                        )
                        .at(node_path(node, "fallback"))
                        .hint(hint),
                    );
                }
                Some(&t) if t.0 == i => {
                    self.push(
                        Diagnostic::error(
                            Code::FallbackCycle,
                            fb.span,
                            format!("node `{}` is its own fallback", fb.value),
                        )
                        .at(node_path(node, "fallback"))
                        .hint("a fallback must be a different node (e.g. a smaller model)"),
                    );
                }
                Some(&t) => targets[i] = Some(t),
            }
        }
        // Fallback chains: each node has at most one fallback, so walk each chain.
        let mut reported = HashSet::new();
        for start in 0..nodes.len() {
            let mut seen = vec![start];
            let mut cur = start;
            while let Some(next) = targets[cur] {
                if next.0 == start {
                    let mut ring: Vec<usize> = seen.clone();
                    ring.sort_unstable();
                    if reported.insert(ring) {
                        let names: Vec<&str> = seen
                            .iter()
                            .chain([&start])
                            .map(|&k| nodes[k].id.value.as_str())
                            .collect();
                        let span = nodes[start]
                            .fallback
                            .as_ref()
                            .map_or(nodes[start].span, |f| f.span);
                        self.push(
                            Diagnostic::error(
                                Code::FallbackCycle,
                                span,
                                format!("fallbacks form a cycle: {}", names.join(" → ")),
                            )
                            .at(node_path(&nodes[start], "fallback"))
                            .hint("end the chain with a node that has no fallback"),
                        );
                    }
                    break;
                }
                if seen.contains(&next.0) || seen.len() > nodes.len() {
                    break;
                }
                seen.push(next.0);
                cur = next.0;
            }
        }
        targets
    }

    /// Edge ends, self-loops, duplicates, conditions and labels. Returns the
    /// edges whose ends both exist, with their parsed conditions.
    fn check_edges(
        &mut self,
        index: &HashMap<String, NodeId>,
        labels: &[Labels],
    ) -> Vec<CheckedEdge> {
        let mut out = Vec::new();
        let mut seen: HashMap<(String, String, Option<String>), Span> = HashMap::new();
        let ids: Vec<&str> = index.keys().map(String::as_str).collect();
        for edge in &self.spec.edges {
            let path = |f: &str| format!("edges[{}].{f}", edge.index);
            let mut ends = [None, None];
            for (slot, (end, field)) in [(&edge.from, "from"), (&edge.to, "to")]
                .into_iter()
                .enumerate()
            {
                match index.get(&end.value) {
                    Some(&id) => ends[slot] = Some(id),
                    None => {
                        let hint = did_you_mean(&end.value, ids.iter().copied())
                            .unwrap_or_else(|| format!("known nodes: {}", sorted(&ids).join(", ")));
                        self.push(
                            Diagnostic::error(
                                Code::UnknownNode,
                                end.span,
                                format!("unknown node `{}` in edge {}", end.value, edge.index),
                            )
                            .at(path(field))
                            .hint(hint),
                        );
                    }
                }
            }
            let key = (
                edge.from.value.clone(),
                edge.to.value.clone(),
                edge.condition.as_ref().map(|c| c.value.clone()),
            );
            if let Some(&first) = seen.get(&key) {
                self.push(
                    Diagnostic::error(
                        Code::DuplicateEdge,
                        edge.span,
                        format!(
                            "edge `{}` → `{}` is declared twice",
                            edge.from.value, edge.to.value
                        ),
                    )
                    .at(format!("edges[{}]", edge.index))
                    .related(first, "first declared here")
                    .hint("remove the duplicate"),
                );
            } else {
                seen.insert(key, edge.span);
            }
            if edge.from.value == edge.to.value && ends[0].is_some() {
                self.push(
                    Diagnostic::error(
                        Code::SelfLoop,
                        edge.span,
                        format!("edge from `{}` to itself", edge.from.value),
                    )
                    .at(format!("edges[{}]", edge.index))
                    .hint("topologies are acyclic; use `retries` to run a node again"),
                );
                continue;
            }
            let condition = edge
                .condition
                .as_ref()
                .and_then(|c| self.check_condition(c, &path("condition"), ends[0], labels));
            if let [Some(from), Some(to)] = ends {
                out.push(CheckedEdge {
                    from,
                    to,
                    condition,
                    spec_index: edge.index,
                    span: edge.span,
                    description: edge.description.as_ref().map(|d| d.value.clone()),
                });
            }
        }
        out
    }

    fn check_condition(
        &mut self,
        text: &crate::decode::Spanned<String>,
        path: &str,
        from: Option<NodeId>,
        labels: &[Labels],
    ) -> Option<Condition> {
        let inner = self.string_content_start(text.span);
        match Condition::parse(&text.value) {
            Err(err) => {
                let lead = text.value.len() - text.value.trim_start().len();
                let at = if err.line == 1 {
                    inner + lead + err.column - 1
                } else {
                    inner
                };
                let at = at.min(text.span.end.saturating_sub(1)).max(text.span.start);
                self.push(
                    Diagnostic::error(
                        Code::BadCondition,
                        Span::new(at, at + 1),
                        format!("condition `{}` does not parse: {}", text.value, err.message),
                    )
                    .at(path)
                    .hint("a condition is a bare label (`need_retrieval`) or a CEL expression such as `size(outputs.retrieve.hits) > 5`"),
                );
                None
            }
            Ok(Condition::Label(label)) => {
                let from = from?;
                let source = &self.spec.nodes[from.0];
                match &labels[from.0] {
                    Labels::Dynamic => {}
                    Labels::None => self.push(
                        Diagnostic::error(
                            Code::UnknownLabel,
                            text.span,
                            format!(
                                "condition `{label}` is a label, but node `{}` (type `{}`) emits no labels",
                                source.id.value, source.kind.value
                            ),
                        )
                        .at(path)
                        .hint("route with a `router` node, or write a CEL expression over `outputs`"),
                    ),
                    Labels::Declared(known) if !known.contains(&label) => {
                        let mut hint = format!("`{}` emits: {}", source.id.value, known.join(", "));
                        if let Some(m) = did_you_mean(&label, known.iter().map(String::as_str)) {
                            hint = format!("{m} ({hint})");
                        }
                        self.push(
                            Diagnostic::error(
                                Code::UnknownLabel,
                                text.span,
                                format!("node `{}` never emits the label `{label}`", source.id.value),
                            )
                            .at(path)
                            .hint(hint),
                        );
                    }
                    Labels::Declared(_) => {}
                }
                Some(Condition::Label(label))
            }
            Ok(Condition::Expr(expr)) => {
                for var in expr.variables() {
                    if !VARIABLES.contains(&var.as_str()) {
                        let mut hint = format!(
                            "conditions can read {}",
                            VARIABLES.map(|v| format!("`{v}`")).join(", ")
                        );
                        if let Some(m) = did_you_mean(var, VARIABLES) {
                            hint = format!("{m} ({hint})");
                        }
                        self.push(
                            Diagnostic::error(
                                Code::UnknownVariable,
                                text.span,
                                format!("condition reads `{var}`, which is not defined"),
                            )
                            .at(path)
                            .hint(hint),
                        );
                    }
                }
                Some(Condition::Expr(expr))
            }
        }
    }

    /// Byte offset of a string's content (past an opening quote).
    fn string_content_start(&self, span: Span) -> usize {
        match self.source.text().as_bytes().get(span.start) {
            Some(b'"' | b'\'') => span.start + 1,
            _ => span.start,
        }
    }

    /// Cycles, entry nodes and reachability. Returns a topological order.
    fn check_graph(
        &mut self,
        index: &HashMap<String, NodeId>,
        edges: &[CheckedEdge],
        fallbacks: &[Option<NodeId>],
    ) -> Option<Vec<NodeId>> {
        let nodes = &self.spec.nodes;
        let n = nodes.len();
        let mut out_adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut indeg = vec![0usize; n];
        for (k, e) in edges.iter().enumerate() {
            out_adj[e.from.0].push(k);
            indeg[e.to.0] += 1;
        }
        let is_fallback: Vec<bool> = {
            let mut v = vec![false; n];
            for t in fallbacks.iter().flatten() {
                v[t.0] = true;
            }
            v
        };
        // Fallback nodes stand in for another node; edges of their own would
        // make the degraded path ambiguous.
        for (i, node) in nodes.iter().enumerate() {
            if is_fallback[i]
                && (indeg[i] > 0 || !out_adj[i].is_empty())
                && index.get(&node.id.value) == Some(&NodeId(i))
            {
                self.push(
                    Diagnostic::error(
                        Code::InvalidValue,
                        node.id.span,
                        format!("node `{}` is used as a fallback but also has edges", node.id.value),
                    )
                    .at(node_path(node, "id"))
                    .hint("a fallback replaces the failed node and inherits its edges; remove this node's own edges"),
                );
            }
        }

        // Kahn's algorithm; whatever is left over lies on or behind a cycle.
        let mut deg = indeg.clone();
        let mut queue: VecDeque<usize> = (0..n).filter(|&i| deg[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(u) = queue.pop_front() {
            order.push(NodeId(u));
            for &k in &out_adj[u] {
                let v = edges[k].to.0;
                deg[v] -= 1;
                if deg[v] == 0 {
                    queue.push_back(v);
                }
            }
        }
        let acyclic = order.len() == n;
        if !acyclic {
            self.report_cycles(edges, &out_adj, &deg);
        }

        let entries: Vec<usize> = (0..n)
            .filter(|&i| indeg[i] == 0 && !is_fallback[i])
            .collect();
        if entries.is_empty() && n > 0 {
            let span = self
                .spec
                .nodes
                .first()
                .map_or(Span::default(), |nd| nd.span);
            self.push(
                Diagnostic::error(Code::NoEntry, span, "no entry node: every node has an incoming edge")
                    .at("nodes")
                    .hint("a request starts at the nodes without incoming edges; remove the edge into the first node"),
            );
        } else {
            let mut reached = vec![false; n];
            let mut queue: VecDeque<usize> = entries.iter().copied().collect();
            for &e in &entries {
                reached[e] = true;
            }
            while let Some(u) = queue.pop_front() {
                let next = out_adj[u]
                    .iter()
                    .map(|&k| edges[k].to.0)
                    .chain(fallbacks[u].map(|f| f.0));
                for v in next {
                    if !reached[v] {
                        reached[v] = true;
                        queue.push_back(v);
                    }
                }
            }
            for (i, node) in nodes.iter().enumerate() {
                if !reached[i] && !node.id.value.is_empty() {
                    self.push(
                        Diagnostic::error(
                            Code::Unreachable,
                            node.id.span,
                            format!(
                                "node `{}` cannot be reached from any entry node",
                                node.id.value
                            ),
                        )
                        .at(node_path(node, "id"))
                        .hint("connect it with an edge, use it as a `fallback`, or remove it"),
                    );
                }
            }
        }
        acyclic.then_some(order)
    }

    /// Reports each elementary cycle found by a DFS over the nodes Kahn's
    /// algorithm could not order, naming the cycle.
    fn report_cycles(&mut self, edges: &[CheckedEdge], out_adj: &[Vec<usize>], deg: &[usize]) {
        let n = out_adj.len();
        let mut color = vec![0u8; n]; // 0 new, 1 on stack, 2 done
        let mut reported: HashSet<Vec<usize>> = HashSet::new();
        for start in (0..n).filter(|&i| deg[i] > 0) {
            if color[start] != 0 {
                continue;
            }
            // Explicit stack of (node, next edge position); path holds (node, edge used to enter).
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            let mut path: Vec<(usize, Option<usize>)> = vec![(start, None)];
            color[start] = 1;
            while let Some(&mut (u, ref mut pos)) = stack.last_mut() {
                if let Some(&k) = out_adj[u].get(*pos) {
                    *pos += 1;
                    let v = edges[k].to.0;
                    if color[v] == 0 {
                        color[v] = 1;
                        stack.push((v, 0));
                        path.push((v, Some(k)));
                    } else if color[v] == 1 {
                        let at = path.iter().position(|&(w, _)| w == v).unwrap_or(0);
                        let mut ring: Vec<usize> = path[at..].iter().map(|&(w, _)| w).collect();
                        let mut key = ring.clone();
                        key.sort_unstable();
                        if reported.insert(key) {
                            ring.push(v);
                            let names: Vec<&str> = ring
                                .iter()
                                .map(|&w| self.spec.nodes[w].id.value.as_str())
                                .collect();
                            let closing = &edges[k];
                            self.push(
                                Diagnostic::error(
                                    Code::Cycle,
                                    closing.span,
                                    format!("edges form a cycle: {}", names.join(" → ")),
                                )
                                .at(format!("edges[{}]", closing.spec_index))
                                .hint("topologies are acyclic (a request must end); remove one edge of the cycle, or use `retries` to repeat a node"),
                            );
                        }
                    }
                } else {
                    color[u] = 2;
                    stack.pop();
                    path.pop();
                }
            }
        }
    }

    fn resolve(
        self,
        index: HashMap<String, NodeId>,
        edges: Vec<CheckedEdge>,
        fallbacks: Vec<Option<NodeId>>,
        resources: Vec<Resource>,
        order: Vec<NodeId>,
    ) -> Topology {
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
        })
    }
}

struct CheckedEdge {
    from: NodeId,
    to: NodeId,
    condition: Option<Condition>,
    spec_index: usize,
    span: Span,
    description: Option<String>,
}

fn sorted<'a>(ids: &[&'a str]) -> Vec<&'a str> {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v
}

/// Resource-tag prices win over the model's row in the price table; a
/// per-1k-tokens price applies to input and output unless split prices exist.
fn merge_prices(
    tag: &PriceSpec,
    model: Option<&PriceSpec>,
    cpu_default: Option<rust_decimal::Decimal>,
) -> Prices {
    let pick =
        |f: fn(&PriceSpec) -> Option<rust_decimal::Decimal>| f(tag).or_else(|| model.and_then(f));
    let both = pick(|p| p.cost_per_1k_tokens.as_ref().map(|d| d.value));
    Prices {
        cost_per_call: pick(|p| p.cost_per_call.as_ref().map(|d| d.value)),
        cost_per_1k_input_tokens: pick(|p| p.cost_per_1k_input_tokens.as_ref().map(|d| d.value))
            .or(both),
        cost_per_1k_output_tokens: pick(|p| p.cost_per_1k_output_tokens.as_ref().map(|d| d.value))
            .or(both),
        cost_per_cpu_ms: pick(|p| p.cost_per_cpu_ms.as_ref().map(|d| d.value)).or(cpu_default),
    }
}

/// Reports every malformed secret reference (`${env:NAME}`, `${file:/path}`)
/// in a node's config; resolving them happens when the node is built.
fn check_references(value: &crate::value::Value, path: &str, diags: &mut Vec<Diagnostic>) {
    use crate::value::Kind;
    match &value.kind {
        Kind::Str(s) if crate::secret::has_reference(s) => {
            if let Err(problem) = crate::secret::references(s) {
                diags.push(
                    Diagnostic::error(Code::BadConfig, value.span, problem)
                        .at(path.to_string())
                        .hint("reference a secret as `${env:NAME}` or `${file:/absolute/path}`"),
                );
            }
        }
        Kind::Seq(items) => {
            for (i, v) in items.iter().enumerate() {
                check_references(v, &format!("{path}[{i}]"), diags);
            }
        }
        Kind::Map(map) => {
            for (k, v) in &map.entries {
                check_references(v, &format!("{path}.{}", k.name), diags);
            }
        }
        _ => {}
    }
}
