//! Why an edge was taken or not, in words, with the values a condition read.

use std::borrow::Cow;

use glassbox_topology::Expr;
use serde_json::{Map, Value};

use crate::output::NodeOutput;

fn source(src: &str, via: Option<&str>) -> String {
    match via {
        Some(f) => format!("{src} (via fallback {f})"),
        None => src.to_string(),
    }
}

/// An edge without a condition (taken because its source succeeded).
pub(crate) fn unconditional(src: &str, via: Option<&str>) -> Cow<'static, str> {
    match via {
        Some(f) => Cow::Owned(format!("no condition; {src} fell back to {f}")),
        None => Cow::Borrowed("no condition"),
    }
}

/// A bare-label condition: compared as a string.
pub(crate) fn label(src: &str, via: Option<&str>, want: &str, out: &NodeOutput) -> (bool, String) {
    let who = source(src, via);
    match out.label.as_deref() {
        Some(got) if got == want => {
            let why = match out.rule() {
                Some(rule) => format!("label {want} emitted by {who} (rule {rule})"),
                None => format!("label {want} emitted by {who}"),
            };
            (true, why)
        }
        Some(got) => (false, format!("{who} emitted label {got}, not {want}")),
        None => (false, format!("{who} emitted no label (wanted {want})")),
    }
}

/// A CEL condition: its result and the values it read. An expression that
/// cannot be evaluated (e.g. it reads a skipped node's output) counts as
/// false, and the why says so.
pub(crate) fn expr(
    expr: &Expr,
    reads: &[String],
    input: &Value,
    outputs: &Map<String, Value>,
    labels: &Map<String, Value>,
) -> (bool, String) {
    let values = reads
        .iter()
        .map(|path| {
            format!(
                "{path} = {}",
                describe(lookup(path, input, outputs, labels))
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let with = if values.is_empty() {
        String::new()
    } else {
        format!(" ({values})")
    };
    match expr.evaluate(input, outputs, labels) {
        Ok(b) => (b, format!("{} is {b}{with}", expr.source)),
        Err(e) => (false, format!("{e}; treated as false{with}")),
    }
}

fn lookup<'v>(
    path: &str,
    input: &'v Value,
    outputs: &'v Map<String, Value>,
    labels: &'v Map<String, Value>,
) -> Option<&'v Value> {
    let mut parts = path.split('.');
    let root = parts.next()?;
    let first = parts.next()?;
    let mut cur = match root {
        "input" => input.get(first)?,
        "outputs" => outputs.get(first)?,
        "labels" => labels.get(first)?,
        _ => return None,
    };
    for p in parts {
        cur = cur.get(p)?;
    }
    Some(cur)
}

/// A short rendering of a value: sizes for collections, short scalars.
pub(crate) fn describe(value: Option<&Value>) -> String {
    match value {
        None => "missing".to_string(),
        Some(Value::Array(a)) => format!("[{} items]", a.len()),
        Some(Value::Object(o)) => format!("{{{} keys}}", o.len()),
        Some(Value::String(s)) => format!("{:?}", glassbox_trace::truncate(s, 40)),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expressions_report_the_values_they_read() {
        let Ok(e) = Expr::compile("size(outputs.retrieve.hits) > 5") else {
            panic!()
        };
        let outputs = json!({"retrieve": {"hits": [1, 2, 3]}});
        let (taken, why) = expr(
            &e,
            &["outputs.retrieve.hits".to_string()],
            &json!({}),
            outputs.as_object().unwrap(),
            &Map::new(),
        );
        assert!(!taken);
        assert_eq!(
            why,
            "size(outputs.retrieve.hits) > 5 is false (outputs.retrieve.hits = [3 items])"
        );
    }

    #[test]
    fn labels_name_the_rule() {
        let out = NodeOutput::new(json!(null)).label("need_retrieval").fact(
            glassbox_trace::Fact::Routed {
                label: "need_retrieval".into(),
                rule: Some("mentions_price".into()),
                reason: String::new(),
            },
        );
        let (taken, why) = label("route", None, "need_retrieval", &out);
        assert!(taken);
        assert_eq!(
            why,
            "label need_retrieval emitted by route (rule mentions_price)"
        );
        let (taken, why) = label("route", None, "direct_answer", &out);
        assert!(!taken);
        assert_eq!(why, "route emitted label need_retrieval, not direct_answer");
    }
}
