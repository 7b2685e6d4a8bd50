//! What the load sends: the inputs file (a JSON object or a plain
//! question per line) and each input's length bucket.

use serde_json::{Value, json};

use crate::BenchError;
use crate::stats::Buckets;

/// One request input and the length bucket it falls in.
#[derive(Debug, Clone)]
pub struct Input {
    pub body: Vec<u8>,
    pub bucket: usize,
}

/// Reads the inputs file: a JSON object or a plain question per line.
pub fn parse_inputs(name: &str, text: &str, buckets: &Buckets) -> Result<Vec<Input>, BenchError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value = if line.starts_with('{') {
            let v: Value = serde_json::from_str(line).map_err(|e| {
                BenchError::Invalid(format!(
                    "`{name}`:{}: not a JSON object: {e} (write plain questions without a leading `{{`)",
                    i + 1
                ))
            })?;
            if !v.is_object() {
                return Err(BenchError::Invalid(format!(
                    "`{name}`:{}: not a JSON object",
                    i + 1
                )));
            }
            v
        } else {
            json!({ "question": line })
        };
        out.push(input(&value, buckets));
    }
    if out.is_empty() {
        return Err(BenchError::Invalid(format!("`{name}` has no inputs")));
    }
    Ok(out)
}

/// One input as sent, bucketed by the length of its `question` (or of the
/// whole input when it has none).
pub fn input(value: &Value, buckets: &Buckets) -> Input {
    // A `Value` always serialises.
    let body = serde_json::to_vec(value).unwrap_or_default();
    let chars = match value.get("question").and_then(Value::as_str) {
        Some(q) => q.chars().count(),
        None => String::from_utf8_lossy(&body).chars().count(),
    };
    Input {
        body,
        bucket: buckets.index(chars),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(matches!(err, BenchError::Invalid(_)), "{err}");
        let err = parse_inputs("q.txt", "{\"a\": 1}\n[1]\n", &b);
        assert!(err.is_ok(), "a line not starting with `{{` is a question");
        assert!(parse_inputs("empty.txt", "\n\n", &b).is_err());
    }
}
