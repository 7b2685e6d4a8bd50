//! A document tree that remembers where every value was written.
//!
//! JSON and YAML both parse into this one tree, so every later stage (field
//! decoding, validation, node-kind config checks) can point at the exact
//! line and column of what it complains about, whatever the input format.

use crate::source::Span;

/// A parsed value and the span it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub kind: Kind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Null,
    Bool(bool),
    /// A number, kept as written so prices convert to decimals exactly.
    Number(Number),
    Str(String),
    Seq(Vec<Value>),
    Map(Map),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Number {
    pub raw: String,
}

impl Number {
    pub fn as_i64(&self) -> Option<i64> {
        let raw = self.raw.strip_prefix('+').unwrap_or(&self.raw);
        raw.parse().ok()
    }

    pub fn as_f64(&self) -> Option<f64> {
        let raw = self.raw.strip_prefix('+').unwrap_or(&self.raw);
        match raw {
            ".inf" | ".Inf" | ".INF" => Some(f64::INFINITY),
            "-.inf" | "-.Inf" | "-.INF" => Some(f64::NEG_INFINITY),
            ".nan" | ".NaN" | ".NAN" => Some(f64::NAN),
            _ => raw.parse().ok(),
        }
    }

    /// The exact decimal value, if the literal is finite.
    pub fn as_decimal(&self) -> Option<rust_decimal::Decimal> {
        let raw = self.raw.strip_prefix('+').unwrap_or(&self.raw);
        raw.parse::<rust_decimal::Decimal>()
            .ok()
            .or_else(|| rust_decimal::Decimal::from_scientific(raw).ok())
    }
}

/// A map key with its own span.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub name: String,
    pub span: Span,
}

/// An ordered map (document order is kept for rendering and diffs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map {
    pub entries: Vec<(Key, Value)>,
}

impl Map {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(_, v)| v)
    }

    pub fn key(&self, name: &str) -> Option<&Key> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(k, _)| k)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Value {
    pub fn new(kind: Kind, span: Span) -> Self {
        Value { kind, span }
    }

    /// A short name of the value's type for messages.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Number(n) if n.as_i64().is_some() => "an integer",
            Kind::Number(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a map",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map> {
        match &self.kind {
            Kind::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Value]> {
        match &self.kind {
            Kind::Seq(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&Number> {
        match &self.kind {
            Kind::Number(n) => Some(n),
            _ => None,
        }
    }

    /// A tree from plain JSON, every span empty: for checking a config that
    /// was not read from a file (e.g. one whose secret references were
    /// resolved at build time).
    pub fn from_json(json: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        let kind = match json {
            J::Null => Kind::Null,
            J::Bool(b) => Kind::Bool(*b),
            J::Number(n) => Kind::Number(Number { raw: n.to_string() }),
            J::String(s) => Kind::Str(s.clone()),
            J::Array(items) => Kind::Seq(items.iter().map(Value::from_json).collect()),
            J::Object(map) => Kind::Map(Map {
                entries: map
                    .iter()
                    .map(|(k, v)| {
                        let key = Key {
                            name: k.clone(),
                            span: Span::default(),
                        };
                        (key, Value::from_json(v))
                    })
                    .collect(),
            }),
        };
        Value::new(kind, Span::default())
    }

    /// Converts to plain JSON (spans dropped). Non-finite numbers become null,
    /// since JSON has no representation for them.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.kind {
            Kind::Null => J::Null,
            Kind::Bool(b) => J::Bool(*b),
            Kind::Number(n) => {
                if let Some(i) = n.as_i64() {
                    J::from(i)
                } else {
                    n.as_f64()
                        .and_then(serde_json::Number::from_f64)
                        .map_or(J::Null, J::Number)
                }
            }
            Kind::Str(s) => J::String(s.clone()),
            Kind::Seq(items) => J::Array(items.iter().map(Value::to_json).collect()),
            Kind::Map(map) => J::Object(
                map.entries
                    .iter()
                    .map(|(k, v)| (k.name.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}
