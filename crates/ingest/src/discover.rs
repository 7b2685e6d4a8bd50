//! Discovered topologies: the graph that stored requests of one
//! topology id actually walked, with how often each node and edge was seen.
//!
//! For an ingested pipeline this *is* its topology (there is no file): the
//! union of its requests' paths, optionally of one `service.version`. It
//! works on any stored record, so it also shows which parts of a native
//! topology traffic really uses.

use std::collections::BTreeSet;

use glassbox_topology::render::{Drawing, DrawnEdge, DrawnNode};
use glassbox_trace::RequestRecord;
use serde::Serialize;

/// A node seen in the requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenNode {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// Requests in which it ran.
    pub requests: u64,
    /// Its spans in those requests.
    pub spans: u64,
    /// Models it used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// An edge seen in the requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeenEdge {
    pub from: String,
    pub to: String,
    /// How it was observed (`parent span`, `ran after`, or a native
    /// edge's condition).
    pub why: String,
    pub requests: u64,
}

/// The graph of one topology as its requests walked it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discovered {
    pub topology_id: String,
    /// The versions seen, sorted.
    pub versions: Vec<String>,
    pub requests: u64,
    pub nodes: Vec<SeenNode>,
    pub edges: Vec<SeenEdge>,
}

/// Edge reasons kept as they are; a native edge's reason names its
/// condition's values, so only `taken` edges are counted, by condition.
fn why_of(e: &glassbox_trace::PathEdge) -> String {
    match &e.condition {
        Some(c) => c.to_string(),
        None => e.why.to_string(),
    }
}

/// The union of `records`' paths (records of other topologies are skipped).
pub fn discover<'a>(
    topology_id: &str,
    records: impl IntoIterator<Item = &'a RequestRecord>,
) -> Discovered {
    let mut d = Discovered {
        topology_id: topology_id.to_string(),
        versions: Vec::new(),
        requests: 0,
        nodes: Vec::new(),
        edges: Vec::new(),
    };
    let mut versions = BTreeSet::new();
    for r in records {
        if &*r.topology_id != topology_id {
            continue;
        }
        d.requests += 1;
        versions.insert(r.version.to_string());
        for n in r.path.nodes.iter().filter(|n| n.start_us.is_some()) {
            let i = match d.nodes.iter().position(|s| s.id == *n.id) {
                Some(i) => i,
                None => {
                    d.nodes.push(SeenNode {
                        id: n.id.to_string(),
                        kind: n.kind.to_string(),
                        requests: 0,
                        spans: 0,
                        models: Vec::new(),
                    });
                    d.nodes.len() - 1
                }
            };
            d.nodes[i].requests += 1;
            d.nodes[i].spans += u64::from(n.attempts);
            for m in r.models.iter().filter(|m| m.node == n.id) {
                if !d.nodes[i].models.contains(&m.model) {
                    d.nodes[i].models.push(m.model.clone());
                }
            }
        }
        for e in r.path.edges.iter().filter(|e| e.taken) {
            let why = why_of(e);
            match d
                .edges
                .iter_mut()
                .find(|s| s.from == *e.from && s.to == *e.to && s.why == why)
            {
                Some(s) => s.requests += 1,
                None => d.edges.push(SeenEdge {
                    from: e.from.to_string(),
                    to: e.to.to_string(),
                    why,
                    requests: 1,
                }),
            }
        }
    }
    d.versions = versions.into_iter().collect();
    d
}

/// A discovered graph as a drawing: each node's kind and how many of the
/// requests ran it (and its models); parent → child arrows solid, "ran
/// after" arrows dashed.
pub fn drawing(d: &Discovered) -> Drawing {
    let nodes = d
        .nodes
        .iter()
        .map(|n| {
            let mut seen = format!("{} of {} requests", n.requests, d.requests);
            if !n.models.is_empty() {
                seen.push_str(" · ");
                seen.push_str(&n.models.join(", "));
            }
            DrawnNode {
                id: n.id.clone(),
                caption: [n.kind.clone(), seen],
                resource: None,
            }
        })
        .collect();
    let edges = d
        .edges
        .iter()
        .map(|e| match e.why.as_str() {
            "parent span" => DrawnEdge {
                from: e.from.clone(),
                to: e.to.clone(),
                label: None,
                dashed: false,
            },
            "ran after" => DrawnEdge {
                from: e.from.clone(),
                to: e.to.clone(),
                label: Some("then".into()),
                dashed: true,
            },
            other => DrawnEdge {
                from: e.from.clone(),
                to: e.to.clone(),
                label: Some(other.to_string()),
                dashed: false,
            },
        })
        .collect();
    Drawing {
        id: d.topology_id.clone(),
        version: if d.versions.is_empty() {
            "?".into()
        } else {
            d.versions.join(", ")
        },
        nodes,
        edges,
    }
}
