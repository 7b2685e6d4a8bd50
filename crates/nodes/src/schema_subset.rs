//! A small, documented subset of JSON Schema for `output_guard` and for
//! the schemas custom steps (`wasm`) declare for their settings and output.
//!
//! The `jsonschema` crate is complete but heavy (an HTTP resolver, dozens
//! of dependencies) for checking the shape of one model answer, so the
//! guard supports the keywords such checks use and rejects the others at
//! build time rather than ignoring them:
//! `type` (a name or a list), `enum`, `const`, `required`, `properties`,
//! `additionalProperties` (boolean or schema), `items`, `minItems`,
//! `maxItems`, `minLength`, `maxLength`, `minimum`, `maximum`, `pattern`.
//! Annotations (`$schema`, `$id`, `title`, `description`, `default`,
//! `examples`) are accepted and ignored.

use serde_json::{Map, Value};

const KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "required",
    "properties",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
];
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "default",
    "examples",
];

/// Checks that `schema` uses only supported keywords and valid patterns.
pub fn check_schema(schema: &Value, path: &str) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return if schema.is_boolean() {
            Ok(())
        } else {
            Err(format!("{path}: a schema must be an object"))
        };
    };
    for (k, v) in obj {
        if ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        if !KEYWORDS.contains(&k.as_str()) {
            return Err(format!(
                "{path}: JSON Schema keyword `{k}` is not supported (supported: {})",
                KEYWORDS.join(", ")
            ));
        }
        match k.as_str() {
            "properties" => {
                for (name, sub) in v.as_object().into_iter().flatten() {
                    check_schema(sub, &format!("{path}.properties.{name}"))?;
                }
            }
            "items" | "additionalProperties" => check_schema(v, &format!("{path}.{k}"))?,
            "pattern" => {
                crate::check::regex(v.as_str().unwrap_or_default())
                    .map_err(|e| format!("{path}.pattern does not compile: {e}"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        // JSON Schema: an integer is any number without a fractional part
        // (`-0` and `1.0` included, which parsers read as floats).
        Value::Number(n)
            if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|x| x.fract() == 0.0) =>
        {
            "integer"
        }
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    let got = type_name(v);
    got == want || (want == "number" && got == "integer")
}

/// One step into a value: an object's property or an array's item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Where a value breaks its schema, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// From the validated value down to the offending one.
    pub path: Vec<Seg>,
    pub message: String,
}

impl Violation {
    /// The path written below `root`: `root.words[0]`.
    pub fn at(&self, root: &str) -> String {
        let mut out = root.to_string();
        for seg in &self.path {
            match seg {
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// Validates `value`; returns the first violation as `path: message`.
pub fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    match violations(schema, value).first() {
        None => Ok(()),
        Some(v) => Err(format!("{}: {}", v.at(path), v.message)),
    }
}

/// Every place `value` breaks `schema`, in document order (a value of the
/// wrong type is one violation; what is inside it is not looked at).
pub fn violations(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    walk(schema, value, &mut Vec::new(), &mut out);
    out
}

fn walk(schema: &Value, value: &Value, path: &mut Vec<Seg>, out: &mut Vec<Violation>) {
    let mut bad = |message: String| {
        out.push(Violation {
            path: path.clone(),
            message,
        })
    };
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            bad("no value is allowed".into());
        }
        return;
    };
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(name) => type_ok(name, value),
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .any(|n| type_ok(n, value)),
            _ => true,
        };
        if !ok {
            bad(format!("expected {t}, found {}", type_name(value)));
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        bad(format!(
            "{value} is not one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        bad(format!("expected {c}"));
    }
    match value {
        Value::Object(map) => walk_object(s, map, path, out),
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = s.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                bad(format!("{n} items, fewer than {min}"));
            }
            if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                bad(format!("{n} items, more than {max}"));
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    path.push(Seg::Index(i));
                    walk(item_schema, item, path, out);
                    path.pop();
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                bad(format!("{n} characters, fewer than {min}"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                bad(format!("{n} characters, more than {max}"));
            }
            if let Some(p) = s.get("pattern").and_then(Value::as_str)
                && let Ok(re) = crate::check::regex(p)
                && !re.is_match(text)
            {
                bad(format!("does not match `{p}`"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                bad(format!("{n} is below {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                bad(format!("{n} is above {max}"));
            }
        }
        _ => {}
    }
}

fn walk_object(
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &mut Vec<Seg>,
    out: &mut Vec<Violation>,
) {
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = name.as_str()
            && !map.contains_key(name)
        {
            out.push(Violation {
                path: path.clone(),
                message: format!("missing required property `{name}`"),
            });
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        let sub = match props.and_then(|p| p.get(k)) {
            Some(sub) => sub,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    out.push(Violation {
                        path: path.clone(),
                        message: format!("property `{k}` is not allowed"),
                    });
                    continue;
                }
                Some(extra) => extra,
                None => continue,
            },
        };
        path.push(Seg::Key(k.clone()));
        walk(sub, v, path, out);
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_the_supported_subset() {
        let schema = json!({
            "type": "object",
            "required": ["answer", "confidence"],
            "properties": {
                "answer": {"type": "string", "minLength": 1},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                "sources": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
            },
            "additionalProperties": false
        });
        assert!(check_schema(&schema, "json_schema").is_ok());
        assert!(validate(&schema, &json!({"answer": "x", "confidence": 0.5}), "$").is_ok());
        assert_eq!(
            validate(&schema, &json!({"answer": "x"}), "$"),
            Err("$: missing required property `confidence`".into())
        );
        assert!(validate(&schema, &json!({"answer": "x", "confidence": 2}), "$").is_err());
        assert!(
            validate(
                &schema,
                &json!({"answer": "x", "confidence": 1, "extra": 1}),
                "$"
            )
            .is_err()
        );
        assert!(
            validate(
                &schema,
                &json!({"answer": "x", "confidence": 1, "sources": [1]}),
                "$"
            )
            .is_err()
        );
        assert!(check_schema(&json!({"oneOf": []}), "json_schema").is_err());
    }

    #[test]
    fn an_integer_is_any_number_without_a_fraction() {
        let schema = json!({"type": "integer"});
        for text in ["0", "-0", "7", "-7", "1.0", "2e3"] {
            let v: Value = serde_json::from_str(text).unwrap_or_default();
            assert!(validate(&schema, &v, "$").is_ok(), "{text}");
        }
        for text in ["1.5", "-0.25", "\"1\""] {
            let v: Value = serde_json::from_str(text).unwrap_or_default();
            assert!(validate(&schema, &v, "$").is_err(), "{text}");
        }
    }

    #[test]
    fn every_violation_is_listed_with_its_path() {
        let schema = json!({
            "type": "object",
            "required": ["words"],
            "properties": {"words": {"type": "array", "items": {"type": "string", "minLength": 1}}},
            "additionalProperties": false
        });
        let found = violations(&schema, &json!({"words": ["ok", "", 3], "extra": 1}));
        let listed: Vec<String> = found
            .iter()
            .map(|v| format!("{}: {}", v.at("settings"), v.message))
            .collect();
        assert_eq!(
            listed,
            [
                "settings: property `extra` is not allowed",
                "settings.words[1]: 0 characters, fewer than 1",
                "settings.words[2]: expected \"string\", found integer",
            ]
        );
        assert_eq!(found[1].path, [Seg::Key("words".into()), Seg::Index(1)]);
    }
}
