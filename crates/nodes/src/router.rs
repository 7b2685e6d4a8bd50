//! `router`: picks one label per request, by ordered rules or by the nearest
//! labelled example.

use glassbox_topology::{Cx, KindSchema, Labels, Obj, Value};

use crate::check;

pub const FIELDS: &[&str] = &[
    "rules",
    "default",
    "examples",
    "min_similarity",
    "embedding",
];
const RULE_FIELDS: &[&str] = &["when", "label", "name"];

/// The `router` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Router;

impl KindSchema for Router {
    fn name(&self) -> &'static str {
        "router"
    }

    fn summary(&self) -> &'static str {
        "emits one label per request: the first rule whose CEL `when` holds, the nearest labelled example, or `default`"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let obj = check::config(config, cx);
        check::require(
            obj.as_ref(),
            cx,
            "default",
            "name the label emitted when no rule matches, e.g. `default: direct_answer`",
        );
        let Some(obj) = obj else { return };
        obj.deny_unknown(cx, FIELDS);
        obj.str(cx, "default");
        if let Some(rules) = obj.seq(cx, "rules") {
            for (i, rule) in rules.iter().enumerate() {
                let mut rcx = cx.field(&format!("rules[{i}]"));
                let Some(r) = Obj::expect(rule, &mut rcx, "a rule") else {
                    continue;
                };
                r.deny_unknown(&mut rcx, RULE_FIELDS);
                if let Some(when) = r.req_str(
                    &mut rcx,
                    "when",
                    "give the rule a CEL condition, e.g. `input.question.contains(\"price\")`",
                ) {
                    let path = rcx.path_of("when");
                    check::expr(&when, &mut rcx, &path);
                }
                r.req_str(&mut rcx, "label", "name the label this rule emits");
                r.str(&mut rcx, "name");
            }
        }
        if let Some(examples) = obj.obj(cx, "examples") {
            let mut ecx = cx.field("examples");
            for (key, _) in examples.map.iter() {
                examples.str_list(&mut ecx, &key.name);
            }
        }
        obj.number(cx, "min_similarity", -1.0, 1.0);
        obj.str(cx, "embedding");
    }

    fn labels(&self, config: &serde_json::Value) -> Labels {
        let mut labels: Vec<String> = Vec::new();
        let mut add = |l: &str| {
            if !labels.iter().any(|x| x == l) {
                labels.push(l.to_string());
            }
        };
        if let Some(rules) = config.get("rules").and_then(|r| r.as_array()) {
            for rule in rules {
                if let Some(l) = rule.get("label").and_then(|l| l.as_str()) {
                    add(l);
                }
            }
        }
        if let Some(examples) = config.get("examples").and_then(|e| e.as_object()) {
            for l in examples.keys() {
                add(l);
            }
        }
        if let Some(d) = config.get("default").and_then(|d| d.as_str()) {
            add(d);
        }
        if labels.is_empty() {
            Labels::Dynamic
        } else {
            Labels::Declared(labels)
        }
    }
}
