//! Checking one run against its case's expectations.
//!
//! Every expectation is checked and every miss is listed (not only the
//! first), each as one line saying what was expected and what happened, so
//! a red CI run reads without opening the trace.

use glassbox_engine::Outcome;
use glassbox_trace::diff::{guard_outcomes, path_taken};
use rust_decimal::Decimal;
use serde_json::Value;

use super::cases::Expect;

/// The answer as text: a string output, its `text` field, or the JSON.
pub fn answer_text(output: &Value) -> String {
    match glassbox_engine::text_of(output) {
        Some(t) => t.to_string(),
        None if output.is_null() => String::new(),
        None => output.to_string(),
    }
}

fn list(items: &[impl AsRef<str>]) -> String {
    if items.is_empty() {
        return "(nothing)".into();
    }
    items
        .iter()
        .map(AsRef::as_ref)
        .collect::<Vec<_>>()
        .join(" → ")
}

/// What did not match; empty when the case passed.
pub fn check(expect: &Expect, outcome: &Outcome) -> Vec<String> {
    let r = &outcome.trace.record;
    let mut misses = Vec::new();
    let want_status = expect.status.as_deref().unwrap_or("ok");
    if r.status.as_str() != want_status {
        let why = r
            .error
            .as_ref()
            .map(|e| format!(" ({}: {})", e.code, e.message))
            .unwrap_or_default();
        misses.push(format!(
            "status: expected `{want_status}`, got `{}`{why}",
            r.status.as_str()
        ));
    }
    let taken = path_taken(&r.path);
    let taken: Vec<&str> = taken.iter().map(|n| &**n).collect();
    if let Some(path) = &expect.path
        && taken != path.iter().map(String::as_str).collect::<Vec<_>>()
    {
        misses.push(format!(
            "path: expected {}, got {}",
            list(path),
            list(&taken)
        ));
    }
    for n in &expect.visits {
        if !taken.contains(&n.as_str()) {
            misses.push(format!("visits: `{n}` did not run (path {})", list(&taken)));
        }
    }
    for n in &expect.skips {
        if taken.contains(&n.as_str()) {
            misses.push(format!("skips: `{n}` ran (path {})", list(&taken)));
        }
    }
    for (node, label) in &expect.labels {
        match r.labels.get(node.as_str()) {
            Some(got) if got == label => {}
            Some(got) => misses.push(format!("labels.{node}: expected `{label}`, got `{got}`")),
            None => misses.push(format!(
                "labels.{node}: expected `{label}`, but `{node}` emitted no label"
            )),
        }
    }
    let spans: Vec<_> = outcome.trace.spans.iter().map(|s| (**s).clone()).collect();
    let guards = guard_outcomes(r, &spans);
    for (node, want) in &expect.guards {
        match node {
            Some(node) => match guards.get(node.as_str()) {
                Some(got) if got == want => {}
                Some(got) => misses.push(format!("guard.{node}: expected `{want}`, got `{got}`")),
                None => misses.push(format!(
                    "guard.{node}: expected `{want}`, but it judged nothing"
                )),
            },
            None if guards.is_empty() => {
                misses.push(format!(
                    "guard: expected `{want}`, but no guard judged the answer"
                ));
            }
            None => {
                for (node, got) in &guards {
                    if got != want {
                        misses.push(format!("guard: expected `{want}`, `{node}` said `{got}`"));
                    }
                }
            }
        }
    }
    let output = outcome.result.as_ref().ok().cloned().unwrap_or(Value::Null);
    let text = answer_text(&output);
    let short = glassbox_trace::truncate(&text, 120);
    let o = &expect.output;
    for c in &o.contains {
        if !text.contains(c.as_str()) {
            misses.push(format!("output.contains: `{c}` not in “{short}”"));
        }
    }
    for c in &o.not_contains {
        if text.contains(c.as_str()) {
            misses.push(format!("output.not_contains: `{c}` is in “{short}”"));
        }
    }
    for re in &o.regex {
        if !re.is_match(&text) {
            misses.push(format!("output.regex: `{re}` does not match “{short}”"));
        }
    }
    if let Some(schema) = &o.json_schema {
        // A text answer is checked as the JSON it holds (what a model writes).
        let value = match &output {
            Value::String(_) | Value::Object(_) if glassbox_engine::text_of(&output).is_some() => {
                serde_json::from_str::<Value>(&text).map_err(|e| e.to_string())
            }
            other => Ok(other.clone()),
        };
        match value {
            Err(e) => misses.push(format!(
                "output.json_schema: the answer is not JSON ({e}): “{short}”"
            )),
            Ok(v) => {
                if let Err(e) = glassbox_nodes::schema_subset::validate(schema, &v, "output") {
                    misses.push(format!("output.json_schema: {e}"));
                }
            }
        }
    }
    if let Some(want) = &o.equals
        && want != &output
        && want.as_str() != Some(text.as_str())
    {
        misses.push(format!("output.equals: expected {want}, got {output}"));
    }
    if let Some(max) = expect.max_cost
        && r.receipt.total > max
    {
        misses.push(format!(
            "max_cost: cost {} {} is over {max}",
            r.receipt.total.normalize(),
            r.receipt.currency
        ));
    }
    if let Some(max) = expect.max_latency_ms {
        let took = r.duration_us as f64 / 1000.0;
        if took > max {
            misses.push(format!("max_latency_ms: took {took:.1} ms, over {max} ms"));
        }
    }
    misses
}

/// `cost` as a plain decimal string.
pub fn cost(d: Decimal) -> String {
    d.normalize().to_string()
}
