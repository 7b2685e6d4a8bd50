//! `output_guard` at run time.
//!
//! Checks the output of one upstream node (`check`, default: the first
//! active upstream) against a keyword blocklist (one Aho-Corasick automaton,
//! case-insensitive), regex rules, a length limit and a JSON Schema subset
//! ([`crate::schema_subset`]). On a violation it fails the node, replaces
//! the answer with `replacement`, or asks the engine to re-run the checked
//! node up to `max_reruns` times (the seeds' "re-execute on bad data"). The
//! rules hit go into the span's tags and the explanation.
//!
//! The checked value passes through unchanged when it passes, so nodes after
//! the guard see the same shape as nodes before it.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput, text_of};
use serde_json::{Value, json};

use super::config::{GuardConfig, OnViolation, Rule};
use crate::schema_subset;

/// Texts longer than this are checked on the blocking pool.
const INLINE_LIMIT: usize = 16 * 1024;

struct Inner {
    blocklist: Option<(AhoCorasick, Vec<String>)>,
    rules: Vec<Rule>,
    max_length: Option<usize>,
    schema: Option<Value>,
    on_violation: OnViolation,
    replacement: String,
    max_reruns: u32,
    check: Option<String>,
}

/// A built output guard.
pub struct GuardNode {
    inner: Arc<Inner>,
}

/// Compiles the blocklist into one automaton and checks the JSON Schema
/// uses only the supported subset.
pub(super) fn build(config: &GuardConfig) -> Result<GuardNode, BuildError> {
    let words = &config.blocklist;
    let blocklist = if words.is_empty() {
        None
    } else {
        let ac = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .build(words)
            .map_err(|e| BuildError::config(format!("`blocklist` cannot be compiled: {e}")))?;
        Some((ac, words.clone()))
    };
    let schema = config.json_schema.clone();
    if let Some(s) = &schema {
        schema_subset::check_schema(s, "json_schema").map_err(BuildError::config)?;
    }
    Ok(GuardNode {
        inner: Arc::new(Inner {
            blocklist,
            rules: config.rules.clone(),
            max_length: config.max_length.map(|n| n as usize),
            schema,
            on_violation: config.on_violation,
            replacement: config
                .replacement
                .clone()
                .unwrap_or_else(|| "Sorry, I can't help with that.".to_string()),
            max_reruns: config
                .max_reruns
                .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX)),
            check: config.check.clone(),
        }),
    })
}

impl Inner {
    fn rule_count(&self) -> usize {
        usize::from(self.blocklist.is_some())
            + self.rules.len()
            + usize::from(self.max_length.is_some())
            + usize::from(self.schema.is_some())
    }

    /// Names of the rules the value violates.
    fn violations(&self, value: &Value) -> Vec<String> {
        let owned;
        let text = match text_of(value) {
            Some(t) => t,
            None => {
                owned = value.to_string();
                &owned
            }
        };
        let mut hits = Vec::new();
        if let Some((ac, words)) = &self.blocklist
            && let Some(m) = ac.find(text)
        {
            hits.push(format!("blocklist ({})", words[m.pattern().as_usize()]));
        }
        for rule in &self.rules {
            if rule.re.is_match(text) != rule.must_match {
                hits.push(rule.name.clone());
            }
        }
        if let Some(max) = self.max_length {
            let n = text.chars().count();
            if n > max {
                hits.push(format!("max_length ({n} > {max})"));
            }
        }
        if let Some(schema) = &self.schema {
            let parsed;
            let target = match value {
                Value::String(s) => match serde_json::from_str::<Value>(s) {
                    Ok(v) => {
                        parsed = v;
                        &parsed
                    }
                    Err(_) => value,
                },
                Value::Object(m) if m.get("text").is_some_and(Value::is_string) => {
                    match serde_json::from_str::<Value>(text) {
                        Ok(v) => {
                            parsed = v;
                            &parsed
                        }
                        Err(_) => value,
                    }
                }
                other => other,
            };
            if let Err(e) = schema_subset::validate(schema, target, "$") {
                hits.push(format!("json_schema ({e})"));
            }
        }
        hits
    }

    fn check(&self, upstream: &str, value: &Value, reruns: u32) -> Result<NodeOutput, NodeError> {
        let hits = self.violations(value);
        let rules = self.rule_count();
        if hits.is_empty() {
            return Ok(NodeOutput::new(value.clone())
                .tag("checked", upstream.to_string())
                .tag("rules", rules.to_string())
                .fact(Fact::Guarded {
                    passed: true,
                    rules,
                    hits,
                    action: None,
                }));
        }
        let listed = hits.join(", ");
        match self.on_violation {
            OnViolation::Replace => Ok(NodeOutput::new(json!({ "text": self.replacement }))
                .tag("checked", upstream.to_string())
                .tag("rules_hit", listed)
                .fact(Fact::Guarded {
                    passed: false,
                    rules,
                    hits,
                    action: Some("replaced".into()),
                })),
            OnViolation::Rerun if reruns < self.max_reruns => Err(NodeError::RerunUpstream {
                upstream: upstream.to_string(),
                reason: listed,
            }),
            OnViolation::Rerun => Err(NodeError::Rejected(format!(
                "output of `{upstream}` still violates {listed} after {reruns} re-run(s)"
            ))),
            OnViolation::Fail => Err(NodeError::Rejected(format!(
                "output of `{upstream}` violates {listed}"
            ))),
        }
    }
}

impl Node for GuardNode {
    fn call(&self, cx: NodeCx) -> Call {
        let checked = match &self.inner.check {
            Some(id) => cx.output(id).map(|o| (id.clone(), o)),
            None => cx.primary_upstream().map(|(id, o)| (id.to_string(), o)),
        };
        let Some((upstream, output)) = checked else {
            return Call::Ready(Err(NodeError::BadInput(
                "nothing to check: no upstream output (set `check` to a node id)".into(),
            )));
        };
        let reruns = cx.reruns();
        let big = text_of(&output.value).map_or(0, str::len) > INLINE_LIMIT;
        if big {
            let inner = self.inner.clone();
            Call::blocking(move || inner.check(&upstream, &output.value, reruns))
        } else {
            Call::Ready(self.inner.check(&upstream, &output.value, reruns))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> GuardConfig {
        crate::check::typed(&super::super::OutputGuard, yaml)
    }

    #[test]
    fn finds_every_violation() {
        let g = build(&config(
            r#"{
            "blocklist": ["Secret"],
            "rules": [{"name": "no_digits", "pattern": "[0-9]"}, {"name": "polite", "pattern": "(?i)please", "must_match": true}],
            "max_length": 20
        }"#,
        ))
        .unwrap();
        let hits = g
            .inner
            .violations(&json!({"text": "the SECRET code is 1234, ok"}));
        assert_eq!(
            hits,
            vec![
                "blocklist (Secret)",
                "no_digits",
                "polite",
                "max_length (27 > 20)"
            ]
        );
        assert!(g.inner.violations(&json!("please")).is_empty());
        assert_eq!(g.inner.rule_count(), 4);
    }

    #[test]
    fn json_schema_checks_text_that_is_json() {
        let g = build(&config(
            r#"{"json_schema": {"type": "object", "required": ["answer"]}}"#,
        ))
        .unwrap();
        assert!(
            g.inner
                .violations(&json!({"text": "{\"answer\": 1}"}))
                .is_empty()
        );
        assert_eq!(g.inner.violations(&json!("{}")).len(), 1);
        assert!(build(&config(r#"{"json_schema": {"anyOf": []}}"#)).is_err());
    }
}
