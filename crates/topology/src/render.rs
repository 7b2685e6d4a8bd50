//! Drawing a topology: Mermaid (for Markdown, GitHub, the dashboard) and
//! Graphviz DOT. Conditions become edge labels; each node shows its kind,
//! resource type and model; fallbacks are dashed edges.

use std::fmt::Write;

use crate::model::{ResourceKind, Topology};

/// Output formats of `glassbox graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

pub fn render(topology: &Topology, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(topology),
        GraphFormat::Dot => dot(topology),
    }
}

fn node_caption(topology: &Topology, i: usize) -> Vec<String> {
    let n = &topology.nodes[i];
    let mut res = n.resource.kind.as_str().to_string();
    if let Some(m) = &n.resource.model {
        res.push_str(" · ");
        res.push_str(m);
    }
    vec![n.id.clone(), n.kind.clone(), res]
}

fn mermaid_escape(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('|', "#124;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

/// Mermaid ids must be simple; node ids may contain `-`, which is fine, but
/// prefixing avoids clashes with Mermaid keywords such as `end`.
fn mid(id: &str) -> String {
    format!("n_{}", id.replace('-', "_"))
}

pub fn mermaid(t: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {} v{}\n---", t.id, t.version);
    out.push_str("flowchart TD\n");
    for (i, n) in t.nodes.iter().enumerate() {
        let caption: Vec<String> = node_caption(t, i)
            .iter()
            .map(|s| mermaid_escape(s))
            .collect();
        let _ = writeln!(
            out,
            "    {}[\"<b>{}</b><br/>{}<br/>{}\"]",
            mid(&n.id),
            caption[0],
            caption[1],
            caption[2]
        );
    }
    for e in &t.edges {
        let from = mid(&t.node(e.from).id);
        let to = mid(&t.node(e.to).id);
        match &e.condition {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "    {from} -->|\"{}\"| {to}",
                    mermaid_escape(c.as_str())
                );
            }
            None => {
                let _ = writeln!(out, "    {from} --> {to}");
            }
        }
    }
    for n in &t.nodes {
        if let Some(f) = n.fallback {
            let _ = writeln!(
                out,
                "    {} -.->|fallback| {}",
                mid(&n.id),
                mid(&t.node(f).id)
            );
        }
    }
    out.push_str("    classDef gpu fill:#fde68a,stroke:#b45309\n    classDef cpu fill:#e0f2fe,stroke:#0369a1\n");
    for kind in [ResourceKind::Gpu, ResourceKind::Cpu] {
        let ids: Vec<String> = t
            .nodes
            .iter()
            .filter(|n| n.resource.kind == kind)
            .map(|n| mid(&n.id))
            .collect();
        if !ids.is_empty() {
            let _ = writeln!(out, "    class {} {}", ids.join(","), kind.as_str());
        }
    }
    out
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn dot(t: &Topology) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&t.id));
    let _ = writeln!(
        out,
        "    label=\"{} v{}\";",
        dot_escape(&t.id),
        dot_escape(&t.version)
    );
    out.push_str("    rankdir=TB;\n    node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n    edge [fontname=\"Helvetica\", fontsize=10];\n");
    for (i, n) in t.nodes.iter().enumerate() {
        let caption: Vec<String> = node_caption(t, i).iter().map(|s| dot_escape(s)).collect();
        let fill = match n.resource.kind {
            ResourceKind::Gpu => "#fde68a",
            ResourceKind::Cpu => "#e0f2fe",
        };
        let _ = writeln!(
            out,
            "    \"{}\" [label=\"{}\\n{}\\n{}\", fillcolor=\"{fill}\"];",
            dot_escape(&n.id),
            caption[0],
            caption[1],
            caption[2]
        );
    }
    for e in &t.edges {
        let from = dot_escape(&t.node(e.from).id);
        let to = dot_escape(&t.node(e.to).id);
        match &e.condition {
            Some(c) => {
                let _ = writeln!(
                    out,
                    "    \"{from}\" -> \"{to}\" [label=\"{}\"];",
                    dot_escape(c.as_str())
                );
            }
            None => {
                let _ = writeln!(out, "    \"{from}\" -> \"{to}\";");
            }
        }
    }
    for n in &t.nodes {
        if let Some(f) = n.fallback {
            let _ = writeln!(
                out,
                "    \"{}\" -> \"{}\" [label=\"fallback\", style=dashed];",
                dot_escape(&n.id),
                dot_escape(&t.node(f).id)
            );
        }
    }
    out.push_str("}\n");
    out
}
