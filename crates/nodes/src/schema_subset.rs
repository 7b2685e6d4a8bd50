//! A small, documented subset of JSON Schema for `output_guard`.
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
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
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

/// Validates `value`; returns the first violation as `path: message`.
pub fn validate(schema: &Value, value: &Value, path: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return if schema == &Value::Bool(false) {
            Err(format!("{path}: no value is allowed"))
        } else {
            Ok(())
        };
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
            return Err(format!("{path}: expected {t}, found {}", type_name(value)));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        return Err(format!(
            "{path}: {value} is not one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        return Err(format!("{path}: expected {c}"));
    }
    match value {
        Value::Object(map) => validate_object(s, map, path)?,
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = s.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("{path}: {n} items, fewer than {min}"));
            }
            if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("{path}: {n} items, more than {max}"));
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("{path}: {n} characters, fewer than {min}"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("{path}: {n} characters, more than {max}"));
            }
            if let Some(p) = s.get("pattern").and_then(Value::as_str)
                && let Ok(re) = crate::check::regex(p)
                && !re.is_match(text)
            {
                return Err(format!("{path}: does not match `{p}`"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                return Err(format!("{path}: {n} is below {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                return Err(format!("{path}: {n} is above {max}"));
            }
        }
        _ => {}
    }
    Ok(())
}

fn validate_object(
    s: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &str,
) -> Result<(), String> {
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = name.as_str()
            && !map.contains_key(name)
        {
            return Err(format!("{path}: missing required property `{name}`"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        match props.and_then(|p| p.get(k)) {
            Some(sub) => validate(sub, v, &format!("{path}.{k}"))?,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => {
                    return Err(format!("{path}: property `{k}` is not allowed"));
                }
                Some(extra) => validate(extra, v, &format!("{path}.{k}"))?,
                None => {}
            },
        }
    }
    Ok(())
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
}
