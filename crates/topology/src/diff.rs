//! Differences between two versions of a topology, for reviewing changes.
//!
//! Nodes are matched by id and edges by `(from, to)`, so a reordered file
//! shows no changes. Within a node every leaf field (config, resource, retry
//! policy, ...) is compared, and price changes are flagged as such, since a
//! price change moves every receipt.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde::Serialize;
use serde_json::Value as Json;

use crate::spec::{EdgeSpec, NodeSpec, TopologySpec};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Removed,
    Changed,
}

/// What part of the topology a change touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Subject {
    Topology,
    Node,
    Edge,
}

/// One difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub kind: ChangeKind,
    pub subject: Subject,
    /// Node id, `from -> to` for edges, or the top-level field.
    pub name: String,
    /// Field path inside the subject (empty when the whole subject changed).
    pub field: String,
    /// True when the field is a price.
    pub price: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<Json>,
}

/// All differences between two topologies.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    pub old_id: String,
    pub old_version: String,
    pub new_id: String,
    pub new_version: String,
    pub changes: Vec<Change>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Human-readable listing: `+` added, `-` removed, `~` changed.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} {} → {} {}",
            self.old_id, self.old_version, self.new_id, self.new_version
        );
        if self.changes.is_empty() {
            out.push_str("  no changes\n");
            return out;
        }
        for c in &self.changes {
            let sign = match c.kind {
                ChangeKind::Added => "+",
                ChangeKind::Removed => "-",
                ChangeKind::Changed => "~",
            };
            let subject = match c.subject {
                Subject::Topology => "topology",
                Subject::Node => "node",
                Subject::Edge => "edge",
            };
            let show = |v: &Option<Json>| v.as_ref().map_or_else(|| "∅".to_string(), compact);
            let price = if c.price { "  [price]" } else { "" };
            let line = match (c.kind, c.field.is_empty()) {
                (ChangeKind::Changed, _) => format!(
                    "{sign} {subject} {}: {} {} → {}{price}",
                    c.name,
                    c.field,
                    show(&c.old),
                    show(&c.new)
                ),
                (_, true) => format!("{sign} {subject} {}{}", c.name, summary(c)),
                (ChangeKind::Added, false) => {
                    format!(
                        "{sign} {subject} {}: {} = {}{price}",
                        c.name,
                        c.field,
                        show(&c.new)
                    )
                }
                (ChangeKind::Removed, false) => {
                    format!(
                        "{sign} {subject} {}: {} (was {}){price}",
                        c.name,
                        c.field,
                        show(&c.old)
                    )
                }
            };
            let _ = writeln!(out, "  {line}");
        }
        let count = |k| self.changes.iter().filter(|c| c.kind == k).count();
        let prices = self.changes.iter().filter(|c| c.price).count();
        let _ = writeln!(
            out,
            "{} added, {} removed, {} changed ({} price changes)",
            count(ChangeKind::Added),
            count(ChangeKind::Removed),
            count(ChangeKind::Changed),
            prices
        );
        out
    }
}

fn summary(c: &Change) -> String {
    let v = c.new.as_ref().or(c.old.as_ref());
    match (c.subject, v) {
        (Subject::Node, Some(v)) => {
            let kind = v.get("type").and_then(Json::as_str).unwrap_or("?");
            let res = v
                .pointer("/resource/type")
                .and_then(Json::as_str)
                .unwrap_or("cpu");
            let model = v
                .pointer("/resource/model")
                .and_then(Json::as_str)
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            format!(" ({kind}, {res}{model})")
        }
        (Subject::Edge, Some(v)) => v
            .get("condition")
            .and_then(Json::as_str)
            .map(|c| format!(" when `{c}`"))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

fn compact(v: &Json) -> String {
    match v {
        Json::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn to_json<T: Serialize>(v: &T) -> Json {
    serde_json::to_value(v).unwrap_or(Json::Null)
}

fn is_price(field: &str) -> bool {
    field
        .rsplit('.')
        .next()
        .is_some_and(|leaf| leaf.starts_with("cost_per_"))
        || field.starts_with("pricing")
}

/// Flattens nested objects into `a.b.c` leaves; arrays stay whole values.
fn leaves(prefix: &str, v: &Json, out: &mut BTreeMap<String, Json>) {
    match v {
        // An entity with no fields besides its key has nothing to compare.
        Json::Object(map) if map.is_empty() && prefix.is_empty() => {}
        Json::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&p, v, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

fn compare(subject: Subject, name: &str, old: &Json, new: &Json, changes: &mut Vec<Change>) {
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    leaves("", old, &mut a);
    leaves("", new, &mut b);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let (o, n) = (a.get(key), b.get(key));
        let kind = match (o, n) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(_), Some(_)) => ChangeKind::Changed,
            (None, Some(_)) => ChangeKind::Added,
            (Some(_), None) => ChangeKind::Removed,
            (None, None) => continue,
        };
        changes.push(Change {
            kind,
            subject,
            name: name.to_string(),
            field: key.clone(),
            price: is_price(key),
            old: o.cloned(),
            new: n.cloned(),
        });
    }
}

fn edge_key(e: &EdgeSpec) -> String {
    format!("{} -> {}", e.from.value, e.to.value)
}

fn node_json(n: &NodeSpec) -> Json {
    let mut v = to_json(n);
    if let Json::Object(m) = &mut v {
        m.remove("id");
    }
    v
}

/// Compares two topology specs.
pub fn diff(old: &TopologySpec, new: &TopologySpec) -> Diff {
    let mut changes = Vec::new();
    for field in [
        "topology_id",
        "version",
        "description",
        "defaults",
        "pricing",
        "metadata",
    ] {
        let a = to_json(old).get(field).cloned().unwrap_or(Json::Null);
        let b = to_json(new).get(field).cloned().unwrap_or(Json::Null);
        if a != b {
            let mut sub = Vec::new();
            compare(Subject::Topology, field, &a, &b, &mut sub);
            for mut c in sub {
                c.price |= field == "pricing";
                c.field = if c.field.is_empty() {
                    field.to_string()
                } else {
                    format!("{field}.{}", c.field)
                };
                c.name = "·".to_string();
                if c.kind != ChangeKind::Changed && c.old.is_none() && c.new.is_none() {
                    continue;
                }
                changes.push(c);
            }
        }
    }
    let old_nodes: BTreeMap<&str, &NodeSpec> =
        old.nodes.iter().map(|n| (n.id.value.as_str(), n)).collect();
    let new_nodes: BTreeMap<&str, &NodeSpec> =
        new.nodes.iter().map(|n| (n.id.value.as_str(), n)).collect();
    for (id, n) in &old_nodes {
        match new_nodes.get(id) {
            None => changes.push(whole(
                ChangeKind::Removed,
                Subject::Node,
                id,
                Some(to_json(*n)),
                None,
            )),
            Some(m) => compare(
                Subject::Node,
                id,
                &node_json(n),
                &node_json(m),
                &mut changes,
            ),
        }
    }
    for (id, n) in &new_nodes {
        if !old_nodes.contains_key(id) {
            changes.push(whole(
                ChangeKind::Added,
                Subject::Node,
                id,
                None,
                Some(to_json(*n)),
            ));
        }
    }
    let old_edges: BTreeMap<String, &EdgeSpec> =
        old.edges.iter().map(|e| (edge_key(e), e)).collect();
    let new_edges: BTreeMap<String, &EdgeSpec> =
        new.edges.iter().map(|e| (edge_key(e), e)).collect();
    for (key, e) in &old_edges {
        match new_edges.get(key) {
            None => changes.push(whole(
                ChangeKind::Removed,
                Subject::Edge,
                key,
                Some(to_json(*e)),
                None,
            )),
            Some(f) => compare(
                Subject::Edge,
                key,
                &edge_json(e),
                &edge_json(f),
                &mut changes,
            ),
        }
    }
    for (key, e) in &new_edges {
        if !old_edges.contains_key(key) {
            changes.push(whole(
                ChangeKind::Added,
                Subject::Edge,
                key,
                None,
                Some(to_json(*e)),
            ));
        }
    }
    Diff {
        old_id: old.topology_id.value.clone(),
        old_version: old.version.value.clone(),
        new_id: new.topology_id.value.clone(),
        new_version: new.version.value.clone(),
        changes,
    }
}

fn edge_json(e: &EdgeSpec) -> Json {
    let mut v = to_json(e);
    if let Json::Object(m) = &mut v {
        m.remove("from");
        m.remove("to");
    }
    v
}

fn whole(
    kind: ChangeKind,
    subject: Subject,
    name: &str,
    old: Option<Json>,
    new: Option<Json>,
) -> Change {
    Change {
        kind,
        subject,
        name: name.to_string(),
        field: String::new(),
        price: false,
        old,
        new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Cx;
    use crate::parse::parse;
    use crate::source::Source;

    fn spec(text: &str) -> TopologySpec {
        let root = parse(&Source::new("t.yaml", text)).unwrap();
        let mut d = Vec::new();
        let s = TopologySpec::decode(&root, &mut Cx::new(&mut d));
        assert!(d.is_empty(), "{d:?}");
        s
    }

    #[test]
    fn reports_nodes_edges_configs_and_prices() {
        let a = spec(
            "topology_id: t\nversion: 1\nnodes:\n  - {id: a, type: router, resource: {type: cpu, cost_per_call: 0.1}}\n  - {id: b, type: template, config: {template: x}}\n  - {id: c, type: template}\nedges:\n  - {from: a, to: b, condition: yes}\n  - {from: a, to: c}\n",
        );
        let b = spec(
            "topology_id: t\nversion: 2\nnodes:\n  - {id: b, type: template, config: {template: y}}\n  - {id: a, type: router, resource: {type: cpu, cost_per_call: 0.2}}\n  - {id: d, type: template}\nedges:\n  - {from: a, to: b, condition: no}\n  - {from: a, to: d}\n",
        );
        let d = diff(&a, &b);
        let find = |name: &str, field: &str| {
            d.changes
                .iter()
                .find(|c| c.name == name && c.field == field)
                .cloned()
        };
        assert_eq!(find("·", "version").unwrap().kind, ChangeKind::Changed);
        let price = find("a", "resource.cost_per_call").unwrap();
        assert!(price.price);
        assert_eq!(price.new, Some(Json::String("0.2".into())));
        assert_eq!(
            find("b", "config.template").unwrap().kind,
            ChangeKind::Changed
        );
        assert_eq!(find("c", "").unwrap().kind, ChangeKind::Removed);
        assert_eq!(find("d", "").unwrap().kind, ChangeKind::Added);
        assert_eq!(
            find("a -> b", "condition").unwrap().kind,
            ChangeKind::Changed
        );
        assert_eq!(find("a -> c", "").unwrap().kind, ChangeKind::Removed);
        assert_eq!(find("a -> d", "").unwrap().kind, ChangeKind::Added);
        let text = d.render();
        assert!(text.contains("[price]"), "{text}");
        assert!(diff(&a, &a).is_empty());
    }
}
