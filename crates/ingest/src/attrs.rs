//! Reading span attributes: typed lookups over an OTLP attribute list, and
//! OpenInference's flattened lists (`retrieval.documents.0.document.id`).
//!
//! A span carries a few dozen attributes, so a linear scan per lookup is
//! cheaper than building a map for every span on the ingest path.

use crate::proto::{KeyValue, Value};

/// The attributes of one span (or resource).
#[derive(Debug, Clone, Copy)]
pub struct Attrs<'a>(pub &'a [KeyValue]);

impl<'a> Attrs<'a> {
    pub fn value(&self, key: &str) -> Option<&'a Value> {
        self.0
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref())
            .and_then(|v| v.value.as_ref())
    }

    pub fn str(&self, key: &str) -> Option<&'a str> {
        match self.value(key)? {
            Value::String(s) if !s.is_empty() => Some(s),
            _ => None,
        }
    }

    /// The first of `keys` that is set, as text.
    pub fn first_str(&self, keys: &[&str]) -> Option<&'a str> {
        keys.iter().find_map(|k| self.str(k))
    }

    /// A count: an integer, an integral double, or digits in a string.
    pub fn count(&self, key: &str) -> Option<u64> {
        match self.value(key)? {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::Double(d) if d.fract() == 0.0 && *d >= 0.0 && *d < 1e18 => Some(*d as u64),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    pub fn float(&self, key: &str) -> Option<f64> {
        match self.value(key)? {
            Value::Double(d) => Some(*d),
            Value::Int(i) => Some(*i as f64),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// Any value as display text (arrays and maps as JSON-like text).
    pub fn text(&self, key: &str) -> Option<String> {
        self.value(key).map(display)
    }

    /// OpenInference flattened list entries under `prefix.` (for example
    /// `retrieval.documents`): for each index, the key after the index and
    /// the value, sorted by index.
    pub fn indexed(&self, prefix: &str) -> Vec<(usize, &'a str, &'a Value)> {
        let mut out = Vec::new();
        for kv in self.0 {
            let Some(rest) = kv
                .key
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('.'))
            else {
                continue;
            };
            let (index, field) = rest.split_once('.').unwrap_or((rest, ""));
            let (Ok(i), Some(v)) = (
                index.parse::<usize>(),
                kv.value.as_ref().and_then(|v| v.value.as_ref()),
            ) else {
                continue;
            };
            out.push((i, field, v));
        }
        out.sort_by_key(|(i, _, _)| *i);
        out
    }
}

/// A value as text: strings as they are, other scalars printed, lists and
/// maps in a compact JSON-like form.
pub fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Bytes(b) => format!("<{} bytes>", b.len()),
        Value::Array(a) => {
            let items: Vec<String> = a
                .values
                .iter()
                .filter_map(|x| x.value.as_ref().map(display))
                .collect();
            format!("[{}]", items.join(", "))
        }
        Value::Kvlist(kv) => {
            let items: Vec<String> = kv
                .values
                .iter()
                .filter_map(|x| {
                    Some(format!(
                        "{}: {}",
                        x.key,
                        display(x.value.as_ref()?.value.as_ref()?)
                    ))
                })
                .collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::AnyValue;

    fn kv(k: &str, v: Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
        }
    }

    #[test]
    fn lookups_and_flattened_lists() {
        let list = vec![
            kv(
                "retrieval.documents.1.document.id",
                Value::String("b".into()),
            ),
            kv(
                "retrieval.documents.0.document.id",
                Value::String("a".into()),
            ),
            kv("retrieval.documents.0.document.score", Value::Double(0.5)),
            kv("llm.token_count.prompt", Value::Int(12)),
            kv("gen_ai.usage.input_tokens", Value::String("7".into())),
            kv("x", Value::Double(1.5)),
        ];
        let a = Attrs(&list);
        assert_eq!(a.count("llm.token_count.prompt"), Some(12));
        assert_eq!(a.count("gen_ai.usage.input_tokens"), Some(7));
        assert_eq!(a.count("x"), None);
        assert_eq!(a.float("x"), Some(1.5));
        let docs = a.indexed("retrieval.documents");
        assert_eq!(docs.len(), 3);
        assert_eq!((docs[0].0, docs[2].0, docs[2].1), (0, 1, "document.id"));
        // `retrieval.documents.0…` is not an index under `retrieval`.
        assert!(a.indexed("retrieval").is_empty());
    }
}
