//! What `glassbox validate` (and every topology load) checks of a `wasm`
//! node beyond its config's shape, by reading the component: that it is
//! there with the SHA-256 written, that it is a step component, that
//! `settings` satisfies the step's own schema (each violation at its
//! `file:line:column`), and that edges only test labels the step declares.
//!
//! Loading compiles the component into the process's cache, so the build
//! that follows a validation does not compile it again.

use glassbox_topology::{Code, Condition, Cx, Diagnostic, Node, Span, Topology, Value};

use super::config::WasmConfig;
use super::host::{self, LoadError};
use crate::schema_subset::{self, Seg};

pub(super) fn inspect(
    config: &WasmConfig,
    node: &Node,
    raw: Option<&Value>,
    topology: &Topology,
    cx: &mut Cx<'_>,
) {
    let (Some(component), Some(sha256)) = (&config.component, &config.sha256) else {
        return;
    };
    let raw = raw.and_then(Value::as_map);
    let span_of = |field: &str| raw.and_then(|m| m.get(field)).map(|v| v.span);
    let loaded = match host::load(&topology.resolve_path(component), sha256) {
        Ok(loaded) => loaded,
        Err(e) => {
            let field = if matches!(e, LoadError::Hash { .. }) {
                "sha256"
            } else {
                "component"
            };
            cx.report(
                Diagnostic::error(Code::BadConfig, span_of(field), e.to_string())
                    .at(cx.path_of(field))
                    .hint(e.hint()),
            );
            return;
        }
    };
    let about = &loaded.about;
    let step = format!("{} {}", about.name, about.version);
    let schema_problem = |what: &str, e: String| {
        Diagnostic::error(
            Code::BadConfig,
            span_of("component"),
            format!("step `{step}` declares a {what} schema Glassbox cannot use: {e}"),
        )
        .hint("custom step schemas use the JSON Schema subset listed in docs/custom-steps.md")
    };
    match super::config::schema_of(about.config_schema.as_deref()) {
        Err(e) => {
            let d = schema_problem("config", e).at(cx.path_of("component"));
            cx.report(d);
        }
        Ok(Some(schema)) => {
            let settings = raw.and_then(|m| m.get("settings"));
            for v in schema_subset::violations(&schema, &config.settings) {
                let span = settings
                    .map(|s| locate(s, &v.path))
                    .or_else(|| span_of("component"));
                cx.report(
                    Diagnostic::error(
                        Code::BadConfig,
                        span,
                        format!("`{}`: {}", v.at("settings"), v.message),
                    )
                    .at(v.at(&cx.path_of("settings")))
                    .hint(format!(
                        "the step `{step}` defines what its settings may hold"
                    )),
                );
            }
        }
        Ok(None) => {}
    }
    if let Err(e) = super::config::schema_of(about.output_schema.as_deref()) {
        let d = schema_problem("output", e).at(cx.path_of("component"));
        cx.report(d);
    }
    labels(node, &about.labels, &step, topology, cx);
}

/// Bare-label conditions on this node's edges must name a declared label.
fn labels(node: &Node, declared: &[String], step: &str, topology: &Topology, cx: &mut Cx<'_>) {
    if topology.edges.len() != topology.spec.edges.len() {
        return;
    }
    for (edge, spec) in topology.edges.iter().zip(&topology.spec.edges) {
        let Some(Condition::Label(label)) = &edge.condition else {
            continue;
        };
        if topology.node(edge.from).id != node.id || declared.contains(label) {
            continue;
        }
        let span = spec.condition.as_ref().map(|c| c.span);
        let mut hint = if declared.is_empty() {
            "the step emits no labels: drop the condition or route on `outputs`".to_string()
        } else {
            format!("labels it declares: {}", declared.join(", "))
        };
        let near = declared.iter().map(String::as_str);
        if let Some(m) = glassbox_topology::diagnostic::did_you_mean(label, near) {
            hint = format!("{m} ({hint})");
        }
        cx.report(
            Diagnostic::error(
                Code::UnknownLabel,
                span,
                format!("edge condition `{label}` is not a label step `{step}` emits"),
            )
            .at(format!("edges[{}].condition", spec.index))
            .hint(hint),
        );
    }
}

/// The span of the value at `path` below `value`, or of the deepest value
/// on the way that exists (a missing property: the object it is missing from).
fn locate(value: &Value, path: &[Seg]) -> Span {
    let mut at = value;
    for seg in path {
        let next = match seg {
            Seg::Key(k) => at.as_map().and_then(|m| m.get(k)),
            Seg::Index(i) => at.as_seq().and_then(|s| s.get(*i)),
        };
        match next {
            Some(v) => at = v,
            None => break,
        }
    }
    at.span
}
