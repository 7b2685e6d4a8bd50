//! The `output_guard` config, read once: rule patterns are compiled here
//! and kept, so a pattern is compiled once and reported with its location.

use glassbox_topology::{Code, Cx, Diagnostic, Obj, Value};
use regex::Regex;

use crate::check;

pub const FIELDS: &[&str] = &[
    "blocklist",
    "rules",
    "max_length",
    "json_schema",
    "on_violation",
    "replacement",
    "max_reruns",
    "check",
];
const RULE_FIELDS: &[&str] = &["name", "pattern", "must_match"];

/// What a guard does with a violation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnViolation {
    /// Fail the node.
    #[default]
    Fail,
    /// Answer `replacement` instead.
    Replace,
    /// Re-run the checked node, up to `max_reruns` times.
    Rerun,
}

const ON_VIOLATION: &[(&str, OnViolation)] = &[
    ("fail", OnViolation::Fail),
    ("replace", OnViolation::Replace),
    ("rerun", OnViolation::Rerun),
];

/// One regex rule.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub re: Regex,
    /// The text must match (else: must not match).
    pub must_match: bool,
}

/// A checked `output_guard` config.
#[derive(Debug, Clone, Default)]
pub struct GuardConfig {
    pub blocklist: Vec<String>,
    pub rules: Vec<Rule>,
    pub max_length: Option<u64>,
    /// A JSON Schema (the subset in [`crate::schema_subset`]).
    pub json_schema: Option<serde_json::Value>,
    pub on_violation: OnViolation,
    pub replacement: Option<String>,
    pub max_reruns: Option<u64>,
    /// The upstream node whose output is checked (default: the first active one).
    pub check: Option<String>,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> GuardConfig {
    let mut out = GuardConfig::default();
    let Some(obj) = check::config(config, cx) else {
        return out;
    };
    obj.deny_unknown(cx, FIELDS);
    out.blocklist = check::strings(obj.str_list(cx, "blocklist"));
    out.max_length = obj.uint(cx, "max_length", 1, 10_000_000).map(|n| n.value);
    out.json_schema = obj
        .obj(cx, "json_schema")
        .and_then(|_| obj.get("json_schema"))
        .map(Value::to_json);
    out.replacement = obj.str(cx, "replacement").map(|s| s.value);
    out.max_reruns = obj.uint(cx, "max_reruns", 0, 10).map(|n| n.value);
    out.check = obj.str(cx, "check").map(|s| s.value);
    if let Some(on) = obj.str(cx, "on_violation") {
        let names: Vec<&str> = ON_VIOLATION.iter().map(|(name, _)| *name).collect();
        check::one_of(&on, &names, cx, "on_violation");
        if let Some((_, action)) = ON_VIOLATION.iter().find(|(name, _)| *name == on.value) {
            out.on_violation = *action;
        }
    }
    if let Some(rules) = obj.seq(cx, "rules") {
        for (i, rule) in rules.iter().enumerate() {
            let mut rcx = cx.field(&format!("rules[{i}]"));
            let Some(r) = Obj::expect(rule, &mut rcx, "a rule") else {
                continue;
            };
            r.deny_unknown(&mut rcx, RULE_FIELDS);
            let name = r.req_str(
                &mut rcx,
                "name",
                "name the rule; rule names appear in traces and explanations",
            );
            let must_match = r.bool(&mut rcx, "must_match").is_some_and(|b| b.value);
            let Some(p) = r.req_str(&mut rcx, "pattern", "give a regular expression") else {
                continue;
            };
            match crate::check::regex(&p.value) {
                Ok(re) => out.rules.push(Rule {
                    name: name.map_or_else(|| format!("rules[{i}]"), |n| n.value),
                    re,
                    must_match,
                }),
                Err(e) => {
                    let msg = e.to_string();
                    let last = msg
                        .lines()
                        .last()
                        .unwrap_or("invalid pattern")
                        .trim()
                        .to_string();
                    rcx.report(
                        Diagnostic::error(
                            Code::BadConfig,
                            p.span,
                            format!("regex `{}` does not compile: {last}", p.value),
                        )
                        .at(rcx.path_of("pattern"))
                        .hint(
                            "patterns use Rust `regex` syntax (no look-around or back-references)",
                        ),
                    );
                }
            }
        }
    }
    out
}
