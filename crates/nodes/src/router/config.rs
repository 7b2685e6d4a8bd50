//! The `router` config, read once: ordered rules (compiled CEL), the
//! default label, and optional labelled examples for nearest-example routing.

use std::collections::BTreeMap;

use glassbox_topology::{Cx, Expr, Labels, Obj, Value};

use crate::check;

pub const FIELDS: &[&str] = &[
    "rules",
    "default",
    "examples",
    "min_similarity",
    "embedding",
];
const RULE_FIELDS: &[&str] = &["when", "label", "name"];

/// One rule: when `expr` holds, emit `label`.
#[derive(Clone)]
pub struct Rule {
    /// `name`, or `rules[i]` when unnamed.
    pub name: String,
    pub label: String,
    pub expr: Expr,
}

/// A checked `router` config.
#[derive(Clone, Default)]
pub struct RouterConfig {
    /// Required; absent in a sketch (a node without `config`).
    pub default: Option<String>,
    pub rules: Vec<Rule>,
    /// Label → sample questions (labels in sorted order).
    pub examples: Option<BTreeMap<String, Vec<String>>>,
    pub min_similarity: Option<f64>,
    /// The local embedding model for examples.
    pub embedding: Option<String>,
    /// Every label written in the config: rule labels, example labels,
    /// then the default (each once).
    labels: Vec<String>,
}

impl RouterConfig {
    pub fn labels(&self) -> Labels {
        if self.labels.is_empty() {
            Labels::Dynamic
        } else {
            Labels::Declared(self.labels.clone())
        }
    }
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> RouterConfig {
    let mut out = RouterConfig::default();
    let obj = check::config(config, cx);
    check::require(
        obj.as_ref(),
        cx,
        "default",
        "name the label emitted when no rule matches, e.g. `default: direct_answer`",
    );
    let Some(obj) = obj else { return out };
    obj.deny_unknown(cx, FIELDS);
    out.default = obj.str(cx, "default").map(|d| d.value);
    let mut rule_labels = Vec::new();
    if let Some(rules) = obj.seq(cx, "rules") {
        for (i, rule) in rules.iter().enumerate() {
            let mut rcx = cx.field(&format!("rules[{i}]"));
            let Some(r) = Obj::expect(rule, &mut rcx, "a rule") else {
                continue;
            };
            r.deny_unknown(&mut rcx, RULE_FIELDS);
            // Declared labels count every string `label`, even of a rule
            // with other problems, so one mistake yields one diagnostic.
            if let Some(label) = r.get("label").and_then(Value::as_str) {
                rule_labels.push(label.to_string());
            }
            let expr = r
                .req_str(
                    &mut rcx,
                    "when",
                    "give the rule a CEL condition, e.g. `input.question.contains(\"price\")`",
                )
                .and_then(|when| {
                    let path = rcx.path_of("when");
                    check::expr(&when, &mut rcx, &path)
                });
            let label = r.req_str(&mut rcx, "label", "name the label this rule emits");
            let name = r.str(&mut rcx, "name");
            if let (Some(expr), Some(label)) = (expr, label) {
                out.rules.push(Rule {
                    name: name.map_or_else(|| format!("rules[{i}]"), |n| n.value),
                    label: label.value,
                    expr,
                });
            }
        }
    }
    let mut example_labels = Vec::new();
    if let Some(examples) = obj.obj(cx, "examples") {
        let mut ecx = cx.field("examples");
        let mut map = BTreeMap::new();
        for (key, _) in examples.map.iter() {
            let texts = examples.str_list(&mut ecx, &key.name);
            example_labels.push(key.name.clone());
            map.insert(
                key.name.clone(),
                texts.into_iter().flatten().map(|t| t.value).collect(),
            );
        }
        out.examples = Some(map);
    }
    out.min_similarity = obj.number(cx, "min_similarity", -1.0, 1.0).map(|n| n.value);
    out.embedding = obj.str(cx, "embedding").map(|e| e.value);

    // Rule labels in order, example labels sorted (as a JSON object keeps
    // them), then the default: the order hints list them in.
    example_labels.sort();
    let default = obj
        .get("default")
        .and_then(Value::as_str)
        .map(str::to_string);
    for label in rule_labels.into_iter().chain(example_labels).chain(default) {
        if !out.labels.contains(&label) {
            out.labels.push(label);
        }
    }
    out
}
