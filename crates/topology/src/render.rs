//! Drawing a topology: Mermaid (for Markdown, GitHub, the dashboard) and
//! Graphviz DOT. Conditions become edge labels; each node shows its kind,
//! resource type and model; fallbacks are dashed edges.
//!
//! Both formats draw a [`Drawing`]: boxes with a caption and edges with an
//! optional label. A topology file is one source of drawings
//! ([`Drawing::of`]); the graph discovered from ingested traces (which has
//! no file) is another, so both are drawn by the same code.

use std::fmt::Write;

use crate::model::{ResourceKind, Topology};

/// Output formats of `glassbox graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

/// A graph to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawing {
    pub id: String,
    pub version: String,
    pub nodes: Vec<DrawnNode>,
    pub edges: Vec<DrawnEdge>,
}

/// A box: its id in bold, then two caption lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawnNode {
    pub id: String,
    pub caption: [String; 2],
    /// Colours it as a CPU or GPU node; `None`: neutral.
    pub resource: Option<ResourceKind>,
}

/// An arrow, dashed or not, with an optional label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawnEdge {
    pub from: String,
    pub to: String,
    pub label: Option<String>,
    pub dashed: bool,
}

impl Drawing {
    /// A topology as drawn: conditions as labels, fallbacks dashed.
    pub fn of(t: &Topology) -> Drawing {
        let nodes = t
            .nodes
            .iter()
            .map(|n| {
                let mut res = n.resource.kind.as_str().to_string();
                if let Some(m) = &n.resource.model {
                    res.push_str(" · ");
                    res.push_str(m);
                }
                DrawnNode {
                    id: n.id.clone(),
                    caption: [n.kind.clone(), res],
                    resource: Some(n.resource.kind),
                }
            })
            .collect();
        let mut edges: Vec<DrawnEdge> = t
            .edges
            .iter()
            .map(|e| DrawnEdge {
                from: t.node(e.from).id.clone(),
                to: t.node(e.to).id.clone(),
                label: match (&e.condition, &e.bound) {
                    (c, None) => c.as_ref().map(|c| c.as_str().to_string()),
                    (None, Some(b)) => Some(format!("loop ≤{}", b.max_iterations)),
                    (Some(c), Some(b)) => {
                        Some(format!("{} (loop ≤{})", c.as_str(), b.max_iterations))
                    }
                },
                dashed: false,
            })
            .collect();
        for n in &t.nodes {
            if let Some(f) = n.fallback {
                edges.push(DrawnEdge {
                    from: n.id.clone(),
                    to: t.node(f).id.clone(),
                    label: Some("fallback".into()),
                    dashed: true,
                });
            }
        }
        Drawing {
            id: t.id.clone(),
            version: t.version.clone(),
            nodes,
            edges,
        }
    }

    pub fn render(&self, format: GraphFormat) -> String {
        match format {
            GraphFormat::Mermaid => self.mermaid(),
            GraphFormat::Dot => self.dot(),
        }
    }

    pub fn mermaid(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "---\ntitle: {} v{}\n---", self.id, self.version);
        out.push_str("flowchart TD\n");
        for n in &self.nodes {
            let _ = writeln!(
                out,
                "    {}[\"<b>{}</b><br/>{}<br/>{}\"]",
                mid(&n.id),
                mermaid_escape(&n.id),
                mermaid_escape(&n.caption[0]),
                mermaid_escape(&n.caption[1])
            );
        }
        for e in &self.edges {
            let (from, to) = (mid(&e.from), mid(&e.to));
            let _ = match (&e.label, e.dashed) {
                (Some(l), false) => {
                    writeln!(out, "    {from} -->|\"{}\"| {to}", mermaid_escape(l))
                }
                (None, false) => writeln!(out, "    {from} --> {to}"),
                (Some(l), true) => writeln!(out, "    {from} -.->|{}| {to}", mermaid_escape(l)),
                (None, true) => writeln!(out, "    {from} -.-> {to}"),
            };
        }
        out.push_str("    classDef gpu fill:#fde68a,stroke:#b45309\n    classDef cpu fill:#e0f2fe,stroke:#0369a1\n");
        for kind in [ResourceKind::Gpu, ResourceKind::Cpu] {
            let ids: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| n.resource == Some(kind))
                .map(|n| mid(&n.id))
                .collect();
            if !ids.is_empty() {
                let _ = writeln!(out, "    class {} {}", ids.join(","), kind.as_str());
            }
        }
        out
    }

    pub fn dot(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&self.id));
        let _ = writeln!(
            out,
            "    label=\"{} v{}\";",
            dot_escape(&self.id),
            dot_escape(&self.version)
        );
        out.push_str("    rankdir=TB;\n    node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\"];\n    edge [fontname=\"Helvetica\", fontsize=10];\n");
        for n in &self.nodes {
            let fill = match n.resource {
                Some(ResourceKind::Gpu) => "#fde68a",
                Some(ResourceKind::Cpu) => "#e0f2fe",
                None => "#f3f4f6",
            };
            let id = dot_escape(&n.id);
            let _ = writeln!(
                out,
                "    \"{id}\" [label=\"{id}\\n{}\\n{}\", fillcolor=\"{fill}\"];",
                dot_escape(&n.caption[0]),
                dot_escape(&n.caption[1])
            );
        }
        for e in &self.edges {
            let (from, to) = (dot_escape(&e.from), dot_escape(&e.to));
            let _ = match (&e.label, e.dashed) {
                (Some(l), false) => writeln!(
                    out,
                    "    \"{from}\" -> \"{to}\" [label=\"{}\"];",
                    dot_escape(l)
                ),
                (None, false) => writeln!(out, "    \"{from}\" -> \"{to}\";"),
                (Some(l), true) => writeln!(
                    out,
                    "    \"{from}\" -> \"{to}\" [label=\"{}\", style=dashed];",
                    dot_escape(l)
                ),
                (None, true) => writeln!(out, "    \"{from}\" -> \"{to}\" [style=dashed];"),
            };
        }
        out.push_str("}\n");
        out
    }
}

pub fn render(topology: &Topology, format: GraphFormat) -> String {
    Drawing::of(topology).render(format)
}

fn mermaid_escape(s: &str) -> String {
    s.replace('"', "#quot;")
        .replace('|', "#124;")
        .replace('<', "#lt;")
        .replace('>', "#gt;")
}

/// Mermaid ids must be simple; node ids may contain `-`, which is fine, but
/// prefixing avoids clashes with Mermaid keywords such as `end`.
/// Other characters (ids of discovered nodes are span names, which may
/// hold spaces or dots) are written as `_uXXXX`, so distinct ids stay distinct.
fn mid(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 2);
    out.push_str("n_");
    for c in id.chars() {
        match c {
            '-' => out.push('_'),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            c => {
                let _ = write!(out, "_u{:04x}", u32::from(c));
            }
        }
    }
    out
}

pub fn mermaid(t: &Topology) -> String {
    Drawing::of(t).mermaid()
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub fn dot(t: &Topology) -> String {
    Drawing::of(t).dot()
}
