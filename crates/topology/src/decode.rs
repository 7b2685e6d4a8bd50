//! Typed reading of a spanned [`Value`] tree that collects every problem.
//!
//! Serde stops at the first error and forgets where things were; validation
//! must report all problems with their locations. So the format (and each
//! node kind's `config`) is read field by field through [`Obj`], which
//! records wrong types, missing and unknown fields into a [`Cx`] and carries
//! on with whatever could be read.

use rust_decimal::Decimal;
use serde::Serialize;

use crate::diagnostic::{Code, Diagnostic, did_you_mean};
use crate::source::Span;
use crate::value::{Kind, Map, Value};

/// A value with the span it was read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

impl<T> std::ops::Deref for Spanned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Serialize> Serialize for Spanned<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for Spanned<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// Where decoded problems go, and the field path being decoded.
#[derive(Debug)]
pub struct Cx<'a> {
    diagnostics: &'a mut Vec<Diagnostic>,
    path: String,
}

impl<'a> Cx<'a> {
    pub fn new(diagnostics: &'a mut Vec<Diagnostic>) -> Self {
        Cx {
            diagnostics,
            path: String::new(),
        }
    }

    /// A context for a field below this one (`name` or `[3]`).
    pub fn field(&mut self, name: &str) -> Cx<'_> {
        let path = join(&self.path, name);
        Cx {
            diagnostics: self.diagnostics,
            path,
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The path of a field below this one, without descending.
    pub fn path_of(&self, name: &str) -> String {
        join(&self.path, name)
    }

    /// Records a diagnostic; one without a path gets this context's path.
    pub fn report(&mut self, mut d: Diagnostic) {
        if d.path.is_empty() {
            d.path = self.path.clone();
        }
        self.diagnostics.push(d);
    }

    pub fn error(
        &mut self,
        code: Code,
        span: Span,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.report(Diagnostic::error(code, span, message).hint(hint));
    }

    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else if name.starts_with('[') {
        format!("{path}{name}")
    } else {
        format!("{path}.{name}")
    }
}

/// A map being read field by field.
#[derive(Debug, Clone, Copy)]
pub struct Obj<'v> {
    pub map: &'v Map,
    pub span: Span,
}

impl<'v> Obj<'v> {
    /// Reads `value` as a map, or reports that it is not one.
    pub fn expect(value: &'v Value, cx: &mut Cx<'_>, what: &str) -> Option<Obj<'v>> {
        match &value.kind {
            Kind::Map(map) => Some(Obj {
                map,
                span: value.span,
            }),
            _ => {
                cx.error(
                    Code::WrongType,
                    value.span,
                    format!("{what} must be a map, found {}", value.type_name()),
                    format!("write {what} as `key: value` pairs"),
                );
                None
            }
        }
    }

    pub fn get(&self, name: &str) -> Option<&'v Value> {
        self.map.get(name)
    }

    /// Reports every field not in `known`, with a did-you-mean.
    pub fn deny_unknown(&self, cx: &mut Cx<'_>, known: &[&str]) {
        for (key, _) in self.map.iter() {
            if known.contains(&key.name.as_str()) {
                continue;
            }
            let hint = did_you_mean(&key.name, known.iter().copied())
                .unwrap_or_else(|| format!("known fields: {}", known.join(", ")));
            cx.report(
                Diagnostic::error(
                    Code::UnknownField,
                    key.span,
                    format!("unknown field `{}`", key.name),
                )
                .at(cx.path_of(&key.name))
                .hint(hint),
            );
        }
    }

    /// Reports a missing required field.
    pub fn missing(&self, cx: &mut Cx<'_>, name: &str, hint: &str) {
        cx.report(
            Diagnostic::error(
                Code::MissingField,
                self.span_head(),
                format!("missing required field `{name}`"),
            )
            .at(cx.path_of(name))
            .hint(hint.to_string()),
        );
    }

    /// The first line of the map, so "missing field" points at its start.
    fn span_head(&self) -> Span {
        Span::new(self.span.start, self.span.start + 1)
    }

    fn wrong_type(cx: &mut Cx<'_>, name: &str, value: &Value, expected: &str) {
        cx.report(
            Diagnostic::error(
                Code::WrongType,
                value.span,
                format!("`{name}` must be {expected}, found {}", value.type_name()),
            )
            .at(cx.path_of(name))
            .hint(format!("write `{name}` as {expected}")),
        );
    }

    /// An optional string field. Numbers are accepted as written (YAML users
    /// write `version: 3.2` unquoted).
    pub fn str(&self, cx: &mut Cx<'_>, name: &str) -> Option<Spanned<String>> {
        let value = self.get(name)?;
        match &value.kind {
            Kind::Str(s) => Some(Spanned::new(s.clone(), value.span)),
            Kind::Number(n) if name == "version" => Some(Spanned::new(n.raw.clone(), value.span)),
            _ => {
                Self::wrong_type(cx, name, value, "a string");
                None
            }
        }
    }

    /// A required, non-empty string field.
    pub fn req_str(&self, cx: &mut Cx<'_>, name: &str, hint: &str) -> Option<Spanned<String>> {
        if self.get(name).is_none() {
            self.missing(cx, name, hint);
            return None;
        }
        let s = self.str(cx, name)?;
        if s.value.trim().is_empty() {
            cx.report(
                Diagnostic::error(
                    Code::InvalidValue,
                    s.span,
                    format!("`{name}` must not be empty"),
                )
                .at(cx.path_of(name))
                .hint(hint.to_string()),
            );
            return None;
        }
        Some(s)
    }

    pub fn bool(&self, cx: &mut Cx<'_>, name: &str) -> Option<Spanned<bool>> {
        let value = self.get(name)?;
        match &value.kind {
            Kind::Bool(b) => Some(Spanned::new(*b, value.span)),
            _ => {
                Self::wrong_type(cx, name, value, "`true` or `false`");
                None
            }
        }
    }

    /// An integer field within `min..=max`.
    pub fn uint(&self, cx: &mut Cx<'_>, name: &str, min: u64, max: u64) -> Option<Spanned<u64>> {
        let value = self.get(name)?;
        let Some(n) = value.as_number() else {
            Self::wrong_type(cx, name, value, "a whole number");
            return None;
        };
        let Some(i) = n.as_i64() else {
            Self::wrong_type(cx, name, value, "a whole number");
            return None;
        };
        if i < min as i64 || (i as u64) > max {
            cx.report(
                Diagnostic::error(
                    Code::OutOfRange,
                    value.span,
                    format!("`{name}` is {i}, outside the allowed range {min}..={max}"),
                )
                .at(cx.path_of(name))
                .hint(format!("use a value from {min} to {max}")),
            );
            return None;
        }
        Some(Spanned::new(i as u64, value.span))
    }

    /// A finite number field within `min..=max`.
    pub fn number(&self, cx: &mut Cx<'_>, name: &str, min: f64, max: f64) -> Option<Spanned<f64>> {
        let value = self.get(name)?;
        let Some(x) = value
            .as_number()
            .and_then(|n| n.as_f64())
            .filter(|x| x.is_finite())
        else {
            Self::wrong_type(cx, name, value, "a finite number");
            return None;
        };
        if x < min || x > max {
            cx.report(
                Diagnostic::error(
                    Code::OutOfRange,
                    value.span,
                    format!("`{name}` is {x}, outside the allowed range {min}..={max}"),
                )
                .at(cx.path_of(name))
                .hint(format!("use a value from {min} to {max}")),
            );
            return None;
        }
        Some(Spanned::new(x, value.span))
    }

    /// A price: an exact, non-negative decimal.
    pub fn price(&self, cx: &mut Cx<'_>, name: &str) -> Option<Spanned<Decimal>> {
        let value = self.get(name)?;
        let decimal = match &value.kind {
            Kind::Number(n) => n.as_decimal(),
            _ => None,
        };
        let Some(d) = decimal else {
            let found = match &value.kind {
                Kind::Str(s) => format!("the string \"{s}\""),
                _ => value.type_name().to_string(),
            };
            cx.report(
                Diagnostic::error(
                    Code::BadPrice,
                    value.span,
                    format!("price `{name}` must be a number, found {found}"),
                )
                .at(cx.path_of(name))
                .hint("write prices as plain numbers in the price table's currency, e.g. `0.0002`"),
            );
            return None;
        };
        if d.is_sign_negative() && !d.is_zero() {
            cx.report(
                Diagnostic::error(
                    Code::BadPrice,
                    value.span,
                    format!("price `{name}` is negative ({d})"),
                )
                .at(cx.path_of(name))
                .hint("prices must be zero or more"),
            );
            return None;
        }
        Some(Spanned::new(d, value.span))
    }

    /// A list field.
    pub fn seq(&self, cx: &mut Cx<'_>, name: &str) -> Option<&'v [Value]> {
        let value = self.get(name)?;
        match &value.kind {
            Kind::Seq(items) => Some(items),
            _ => {
                Self::wrong_type(cx, name, value, "a list");
                None
            }
        }
    }

    /// A list of strings.
    pub fn str_list(&self, cx: &mut Cx<'_>, name: &str) -> Option<Vec<Spanned<String>>> {
        let items = self.seq(cx, name)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item.as_str() {
                Some(s) => out.push(Spanned::new(s.to_string(), item.span)),
                None => Self::wrong_type(cx, &format!("{name}[{i}]"), item, "a string"),
            }
        }
        Some(out)
    }

    /// A nested map field.
    pub fn obj(&self, cx: &mut Cx<'_>, name: &str) -> Option<Obj<'v>> {
        let value = self.get(name)?;
        match &value.kind {
            Kind::Map(map) => Some(Obj {
                map,
                span: value.span,
            }),
            _ => {
                Self::wrong_type(cx, name, value, "a map");
                None
            }
        }
    }

    /// The span of a field's key, or of the map when absent.
    pub fn key_span(&self, name: &str) -> Span {
        self.map.key(name).map_or(self.span_head(), |k| k.span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse;
    use crate::source::Source;

    #[test]
    fn collects_every_problem_with_paths() {
        let src = Source::new("t.yaml", "a: x\nb: -1\nc: '0.5'\nd: [1, y]\nzz: 1\n");
        let root = parse(&src).unwrap();
        let mut diags = Vec::new();
        let mut cx = Cx::new(&mut diags);
        let mut cx = cx.field("nodes[2]");
        let obj = Obj::expect(&root, &mut cx, "node").unwrap();
        assert!(obj.uint(&mut cx, "a", 0, 10).is_none());
        assert!(obj.uint(&mut cx, "b", 0, 10).is_none());
        assert!(obj.price(&mut cx, "c").is_none());
        assert!(obj.req_str(&mut cx, "e", "add it").is_none());
        let list = obj.str_list(&mut cx, "d").unwrap();
        assert_eq!(list.len(), 1);
        obj.deny_unknown(&mut cx, &["a", "b", "c", "d", "z"]);
        let codes: Vec<_> = diags.iter().map(|d| (d.code, d.path.as_str())).collect();
        assert_eq!(
            codes,
            vec![
                (Code::WrongType, "nodes[2].a"),
                (Code::OutOfRange, "nodes[2].b"),
                (Code::BadPrice, "nodes[2].c"),
                (Code::MissingField, "nodes[2].e"),
                (Code::WrongType, "nodes[2].d[0]"),
                (Code::UnknownField, "nodes[2].zz"),
            ]
        );
    }

    #[test]
    fn prices_are_exact_decimals() {
        let src = Source::new("t.yaml", "p: 0.1\nq: 1e-4\nr: -0.5\n");
        let root = parse(&src).unwrap();
        let mut diags = Vec::new();
        let mut cx = Cx::new(&mut diags);
        let obj = Obj::expect(&root, &mut cx, "x").unwrap();
        assert_eq!(obj.price(&mut cx, "p").unwrap().value.to_string(), "0.1");
        assert_eq!(obj.price(&mut cx, "q").unwrap().value.to_string(), "0.0001");
        assert!(obj.price(&mut cx, "r").is_none());
        assert_eq!(diags[0].code, Code::BadPrice);
    }
}
