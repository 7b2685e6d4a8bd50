//! JSON Schema → GBNF, llama.cpp's grammar format, for constrained decoding.
//!
//! A grammar sampler masks every token that cannot continue a string of the
//! grammar, so a model constrained by [`json_schema_to_gbnf`]'s output can
//! only write JSON of that schema's shape: tool calls that parse and
//! `response_format: json_schema` answers with the required fields.
//!
//! Why our own converter: llama-cpp-2 offers `json_schema_to_grammar` only
//! with its `common` feature, which builds llama.cpp's C++ `common` library
//! (and its JSON and regex dependencies) into every binary; the workspace
//! builds llama.cpp without it. The subset tools and structured answers use
//! is small, and each keyword outside it is refused by name, with its
//! location, rather than silently dropped:
//!
//! - `type` (a name or a list of names): `object`, `array`, `string`,
//!   `number`, `integer`, `boolean`, `null`;
//! - `properties` (written in alphabetical order of their names; required
//!   ones always, optional ones may be left out), `required`, `additionalProperties`
//!   (extra properties are never generated; with no `properties`, anything
//!   but `false` admits any object);
//! - `items`, `minItems`, `maxItems`; `minLength`, `maxLength`;
//! - `enum`, `const`, `anyOf` and `oneOf` (both as alternatives);
//! - annotations (`title`, `description`, `default`, `examples`,
//!   `$schema`, `$id`, `$comment`, and `format`, an annotation by default
//!   since draft 2019-09) are ignored.
//!
//! Whitespace between tokens is bounded (a few characters), so a small
//! model cannot spend its whole budget on blank lines inside an object.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

#[cfg(test)]
mod tests;

/// A schema the converter cannot turn into a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaError {
    /// Where in the schema, as a JSON path (`$.properties.city`).
    pub path: String,
    pub message: String,
}

/// Keywords the converter understands.
pub const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "enum",
    "const",
    "anyOf",
    "oneOf",
];

const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "$schema",
    "$id",
    "$comment",
    // An annotation by default since draft 2019-09.
    "format",
];

/// Bounds above which repetitions would make the grammar itself huge.
const MAX_REPEAT: u64 = 256;

/// The grammar (root rule `root`) of JSON texts that `schema` admits,
/// within the supported subset (see the module docs).
pub fn json_schema_to_gbnf(schema: &Value) -> Result<String, SchemaError> {
    let mut b = Builder::default();
    let root = b.visit(schema, "$", "json")?;
    b.rules.insert("root".into(), root);
    Ok(b.finish())
}

/// The GBNF literal that matches exactly `text`.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Shared rules: JSON's primitives and a generic value, added when used.
const PRIMITIVES: &[(&str, &str)] = &[
    ("ws", "[ \\t\\n]{0,6}"),
    (
        "char",
        "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})",
    ),
    ("string", "\"\\\"\" char* \"\\\"\""),
    // No `-0`: JSON parsers such as serde_json read it as a float.
    ("integer", "\"0\" | \"-\"? [1-9] [0-9]{0,15}"),
    (
        "number",
        "\"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?",
    ),
    ("boolean", "\"true\" | \"false\""),
    ("null", "\"null\""),
    ("value", "object | array | string | number | boolean | null"),
    (
        "object",
        "\"{\" ws (string ws \":\" ws value (ws \",\" ws string ws \":\" ws value)*)? ws \"}\"",
    ),
    ("array", "\"[\" ws (value (ws \",\" ws value)*)? ws \"]\""),
];

/// Which primitive each primitive refers to (to add what a rule needs).
fn uses(name: &str) -> &'static [&'static str] {
    match name {
        "string" => &["char"],
        "value" => &[
            "object", "array", "string", "number", "boolean", "null", "ws",
        ],
        "object" | "array" => &["value", "string", "ws"],
        _ => &[],
    }
}

#[derive(Default)]
struct Builder {
    /// Rule name → body, for the rules made from the schema.
    rules: BTreeMap<String, String>,
    /// Primitives referred to.
    used: Vec<&'static str>,
}

impl Builder {
    fn finish(mut self) -> String {
        let mut i = 0;
        while i < self.used.len() {
            for dep in uses(self.used[i]) {
                self.mark(dep);
            }
            i += 1;
        }
        let mut out = String::new();
        if let Some(root) = self.rules.remove("root") {
            out.push_str(&format!("root ::= {root}\n"));
        }
        for (name, body) in &self.rules {
            out.push_str(&format!("{name} ::= {body}\n"));
        }
        for (name, body) in PRIMITIVES {
            if self.used.contains(name) {
                out.push_str(&format!("{name} ::= {body}\n"));
            }
        }
        out
    }

    fn mark(&mut self, name: &str) {
        if let Some((n, _)) = PRIMITIVES.iter().find(|(n, _)| *n == name)
            && !self.used.contains(n)
        {
            self.used.push(*n);
        }
    }

    fn prim(&mut self, name: &'static str) -> String {
        self.mark(name);
        name.to_string()
    }

    /// A fresh rule name from a hint (letters, digits and dashes only).
    fn name(&self, hint: &str) -> String {
        let base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let base = if base.is_empty() { "r".into() } else { base };
        let mut name = base.clone();
        let mut n = 1;
        while name == "root"
            || self.rules.contains_key(&name)
            || PRIMITIVES.iter().any(|(p, _)| *p == name)
        {
            n += 1;
            name = format!("{base}-{n}");
        }
        name
    }

    /// Adds a rule and returns its name.
    fn rule(&mut self, hint: &str, body: String) -> String {
        let name = self.name(hint);
        self.rules.insert(name.clone(), body);
        name
    }

    /// The grammar expression for `schema` at `path`.
    fn visit(&mut self, schema: &Value, path: &str, hint: &str) -> Result<String, SchemaError> {
        let obj = match schema {
            Value::Bool(true) => return Ok(self.prim("value")),
            Value::Bool(false) => return Err(err(path, "the schema `false` admits no value")),
            Value::Object(o) => o,
            _ => return Err(err(path, "a schema must be an object or a boolean")),
        };
        for key in obj.keys() {
            if !SUPPORTED.contains(&key.as_str()) && !ANNOTATIONS.contains(&key.as_str()) {
                return Err(err(
                    path,
                    format!(
                        "JSON Schema keyword `{key}` is not supported for constrained decoding \
                         (supported: {}); hint: remove it, or check the value after generation \
                         with an `output_guard`",
                        SUPPORTED.join(", ")
                    ),
                ));
            }
        }
        if let Some(c) = obj.get("const") {
            return Ok(json_literal(c));
        }
        if let Some(e) = obj.get("enum") {
            let values = e
                .as_array()
                .filter(|a| !a.is_empty())
                .ok_or_else(|| err(&format!("{path}.enum"), "`enum` must be a non-empty array"))?;
            let alts: Vec<String> = values.iter().map(json_literal).collect();
            return Ok(group(&alts));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(list) = obj.get(key) {
                let list = list.as_array().filter(|a| !a.is_empty()).ok_or_else(|| {
                    err(
                        &format!("{path}.{key}"),
                        format!("`{key}` must be a non-empty array"),
                    )
                })?;
                let mut alts = Vec::with_capacity(list.len());
                for (i, sub) in list.iter().enumerate() {
                    alts.push(self.visit(sub, &format!("{path}.{key}[{i}]"), hint)?);
                }
                return Ok(group(&alts));
            }
        }
        let types: Vec<&str> = match obj.get("type") {
            None if obj.contains_key("properties") => vec!["object"],
            None if obj.contains_key("items") => vec!["array"],
            None => return Ok(self.prim("value")),
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) if !ts.is_empty() => {
                let mut v = Vec::new();
                for t in ts {
                    v.push(t.as_str().ok_or_else(|| {
                        err(&format!("{path}.type"), "`type` lists must hold type names")
                    })?);
                }
                v
            }
            Some(_) => {
                return Err(err(
                    &format!("{path}.type"),
                    "`type` must be a type name or a non-empty list of them",
                ));
            }
        };
        let mut alts = Vec::with_capacity(types.len());
        for t in types {
            alts.push(self.visit_type(t, obj, path, hint)?);
        }
        Ok(group(&alts))
    }

    fn visit_type(
        &mut self,
        t: &str,
        obj: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        match t {
            "object" => self.object(obj, path, hint),
            "array" => self.array(obj, path, hint),
            "string" => {
                let (min, max) = bounds(obj, "minLength", "maxLength", path)?;
                if min == 0 && max.is_none() {
                    return Ok(self.prim("string"));
                }
                self.mark("char");
                Ok(format!("\"\\\"\" char{} \"\\\"\"", repeat(min, max)))
            }
            "number" => Ok(self.prim("number")),
            "integer" => Ok(self.prim("integer")),
            "boolean" => Ok(self.prim("boolean")),
            "null" => Ok(self.prim("null")),
            other => Err(err(
                &format!("{path}.type"),
                format!(
                    "unknown type `{other}` (types: object, array, string, number, integer, \
                     boolean, null)"
                ),
            )),
        }
    }

    fn object(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        let props = match obj.get("properties") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(_) => {
                return Err(err(
                    &format!("{path}.properties"),
                    "`properties` must be an object",
                ));
            }
        };
        let required: Vec<&str> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .map(|v| {
                    v.as_str().ok_or_else(|| {
                        err(&format!("{path}.required"), "`required` must list names")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(err(
                    &format!("{path}.required"),
                    "`required` must be an array of names",
                ));
            }
        };
        if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
            return Err(err(
                &format!("{path}.required"),
                format!(
                    "`required` names `{missing}`, which `properties` does not define; hint: \
                     describe it under `properties` so the grammar can write it"
                ),
            ));
        }
        let ws = self.prim("ws");
        if props.is_empty() {
            return Ok(match obj.get("additionalProperties") {
                Some(Value::Bool(false)) => format!("\"{{\" {ws} \"}}\""),
                _ => self.prim("object"),
            });
        }
        // Each property as `"key" ws ":" ws value`, in key order.
        let mut kvs = Vec::with_capacity(props.len());
        for (name, sub) in &props {
            let value = self.visit(
                sub,
                &format!("{path}.properties.{name}"),
                &format!("{hint}-{name}"),
            )?;
            let key = json_literal(&Value::String(name.clone()));
            let kv = format!("{key} {ws} \":\" {ws} {value}");
            kvs.push((required.contains(&name.as_str()), kv));
        }
        // After something was written: each property with a leading comma.
        let tail = |from: usize| -> String {
            kvs[from..]
                .iter()
                .map(|(req, kv)| {
                    if *req {
                        format!("{ws} \",\" {ws} {kv}")
                    } else {
                        format!("({ws} \",\" {ws} {kv})?")
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Nothing written yet: the first property present is one of the
        // leading optional ones or the first required one.
        let mut alts = Vec::new();
        let mut all_optional = true;
        for (i, (req, kv)) in kvs.iter().enumerate() {
            alts.push(format!("{kv} {}", tail(i + 1)).trim_end().to_string());
            if *req {
                all_optional = false;
                break;
            }
        }
        let body = if all_optional {
            format!("({})?", alts.join(" | "))
        } else {
            group(&alts)
        };
        let rule = self.rule(hint, format!("\"{{\" {ws} {body} {ws} \"}}\""));
        Ok(rule)
    }

    fn array(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        hint: &str,
    ) -> Result<String, SchemaError> {
        let item = match obj.get("items") {
            None => self.prim("value"),
            Some(Value::Array(_)) => {
                return Err(err(
                    &format!("{path}.items"),
                    "tuple `items` (an array of schemas) is not supported; hint: give one schema",
                ));
            }
            Some(s) => {
                let e = self.visit(s, &format!("{path}.items"), &format!("{hint}-item"))?;
                self.rule(&format!("{hint}-item"), e)
            }
        };
        let (min, max) = bounds(obj, "minItems", "maxItems", path)?;
        let ws = self.prim("ws");
        let more = format!("({ws} \",\" {ws} {item})");
        let body = match (min, max) {
            (_, Some(0)) => String::new(),
            (0, None) => format!("({item} {more}*)?"),
            (0, Some(max)) => format!("({item} {more}{})?", repeat(0, Some(max - 1))),
            (min, max) => format!("{item} {more}{}", repeat(min - 1, max.map(|m| m - 1))),
        };
        Ok(self.rule(
            hint,
            format!("\"[\" {ws} {body} {ws} \"]\"").replace("  ", " "),
        ))
    }
}

fn err(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError {
        path: path.to_string(),
        message: message.into(),
    }
}

/// The literal of a JSON value's compact text.
fn json_literal(v: &Value) -> String {
    literal(&v.to_string())
}

fn group(alts: &[String]) -> String {
    if alts.len() == 1 {
        alts[0].clone()
    } else {
        format!("({})", alts.join(" | "))
    }
}

/// A repetition suffix: `*`, `+`, `{m}`, `{m,}` or `{m,n}`.
fn repeat(min: u64, max: Option<u64>) -> String {
    match (min, max) {
        (0, None) => "*".into(),
        (1, None) => "+".into(),
        (m, None) => format!("{{{m},}}"),
        (m, Some(n)) if m == n => format!("{{{m}}}"),
        (m, Some(n)) => format!("{{{m},{n}}}"),
    }
}

/// `minX` and `maxX` of a schema, checked.
fn bounds(
    obj: &Map<String, Value>,
    min_key: &str,
    max_key: &str,
    path: &str,
) -> Result<(u64, Option<u64>), SchemaError> {
    let get = |key: &str| -> Result<Option<u64>, SchemaError> {
        match obj.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n <= MAX_REPEAT => Ok(Some(n)),
                _ => Err(err(
                    &format!("{path}.{key}"),
                    format!(
                        "`{key}` must be a whole number from 0 to {MAX_REPEAT} for constrained \
                         decoding (given {v})"
                    ),
                )),
            },
        }
    };
    let min = get(min_key)?.unwrap_or(0);
    let max = get(max_key)?;
    if let Some(max) = max
        && max < min
    {
        return Err(err(
            path,
            format!("`{max_key}` ({max}) is below `{min_key}` ({min})"),
        ));
    }
    Ok((min, max))
}
