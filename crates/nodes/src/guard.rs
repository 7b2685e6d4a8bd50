//! `output_guard`: checks an upstream output (blocklist, regex rules, length,
//! JSON Schema) and fails, replaces or re-runs on violation.

use glassbox_topology::{Code, Cx, Diagnostic, KindSchema, Obj, Value};

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

/// The `output_guard` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct OutputGuard;

impl KindSchema for OutputGuard {
    fn name(&self) -> &'static str {
        "output_guard"
    }

    fn summary(&self) -> &'static str {
        "checks output against a blocklist, regex rules, a length limit and a JSON Schema; fails, replaces or re-runs"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let Some(obj) = check::config(config, cx) else {
            return;
        };
        obj.deny_unknown(cx, FIELDS);
        obj.str_list(cx, "blocklist");
        obj.uint(cx, "max_length", 1, 10_000_000);
        obj.obj(cx, "json_schema");
        obj.str(cx, "replacement");
        obj.uint(cx, "max_reruns", 0, 10);
        obj.str(cx, "check");
        if let Some(on) = obj.str(cx, "on_violation") {
            check::one_of(&on, &["fail", "replace", "rerun"], cx, "on_violation");
        }
        if let Some(rules) = obj.seq(cx, "rules") {
            for (i, rule) in rules.iter().enumerate() {
                let mut rcx = cx.field(&format!("rules[{i}]"));
                let Some(r) = Obj::expect(rule, &mut rcx, "a rule") else {
                    continue;
                };
                r.deny_unknown(&mut rcx, RULE_FIELDS);
                r.req_str(
                    &mut rcx,
                    "name",
                    "name the rule; rule names appear in traces and explanations",
                );
                r.bool(&mut rcx, "must_match");
                if let Some(p) = r.req_str(&mut rcx, "pattern", "give a regular expression")
                    && let Err(e) = regex::Regex::new(&p.value)
                {
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
}
