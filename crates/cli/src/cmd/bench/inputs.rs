//! What `glassbox bench` sends: the inputs file (a JSON object or a plain
//! question per line), each input's length bucket, and `--duration`-style
//! durations.

use std::time::Duration;

use serde_json::{Value, json};

use super::stats::Buckets;
use crate::exit::Coded;

/// `30`, `30s`, `1.5s`, `500ms`, `2m`.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!(
            "`{text}` is not a duration (try `30s`, `500ms` or `2m`)"
        )),
    }
}

/// One request input and the length bucket it falls in.
#[derive(Debug, Clone)]
pub(super) struct Input {
    pub(super) body: Vec<u8>,
    pub(super) bucket: usize,
}

/// Reads the inputs file: a JSON object or a plain question per line.
pub(super) fn parse_inputs(
    name: &str,
    text: &str,
    buckets: &Buckets,
) -> anyhow::Result<Vec<Input>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value = if line.starts_with('{') {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                Coded::invalid(format!(
                    "`{name}`:{}: not a JSON object: {e} (write plain questions without a leading `{{`)",
                    i + 1
                ))
            })?;
            if !v.is_object() {
                return Err(Coded::invalid(format!(
                    "`{name}`:{}: not a JSON object",
                    i + 1
                )));
            }
            v
        } else {
            json!({ "question": line })
        };
        out.push(input(&value, buckets)?);
    }
    if out.is_empty() {
        return Err(Coded::invalid(format!("`{name}` has no inputs")));
    }
    Ok(out)
}

pub(super) fn input(value: &Value, buckets: &Buckets) -> anyhow::Result<Input> {
    let body = serde_json::to_vec(value)?;
    let chars = match value.get("question").and_then(Value::as_str) {
        Some(q) => q.chars().count(),
        None => String::from_utf8_lossy(&body).chars().count(),
    };
    Ok(Input {
        body,
        bucket: buckets.index(chars),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn inputs_are_questions_or_json_objects_bucketed_by_length() {
        let b = Buckets::new(vec![10, 100]).unwrap();
        let text = "short?\n\n{\"question\": \"a question of some length\"}\n{\"doc\": 1}\n";
        let inputs = parse_inputs("q.txt", text, &b).unwrap();
        assert_eq!(inputs.len(), 3);
        assert_eq!(inputs[0].body, br#"{"question":"short?"}"#);
        assert_eq!(inputs[0].bucket, 0);
        assert_eq!(inputs[1].bucket, 1);
        // No question: the length of the whole input (`{"doc":1}`, 9 chars).
        assert_eq!(inputs[2].bucket, 0);
    }

    #[test]
    fn bad_inputs_name_the_line() {
        let b = Buckets::new(vec![64]).unwrap();
        let err = parse_inputs("q.txt", "ok\n{not json\n", &b).unwrap_err();
        assert!(err.to_string().contains("`q.txt`:2"), "{err}");
        assert_eq!(exit::code_for(&err), exit::INVALID);
        let err = parse_inputs("q.txt", "{\"a\": 1}\n[1]\n", &b);
        assert!(err.is_ok(), "a line not starting with `{{` is a question");
        assert!(parse_inputs("empty.txt", "\n\n", &b).is_err());
    }
}
