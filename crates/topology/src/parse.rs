//! JSON and YAML into one spanned [`Value`] tree, safely.
//!
//! Both formats go through the YAML 1.2 event parser (`saphyr-parser`; JSON is
//! YAML's flow subset), so locations are exact for both. JSON input is first
//! checked by `serde_json`, whose syntax errors read better for JSON users.
//!
//! Hostile input is bounded, not trusted: the file size, the nesting depth and
//! the number of values after alias expansion all have limits, so a YAML alias
//! bomb or a megabyte of `[` gets an error instead of exhausting memory or the
//! stack. The tree is built with an explicit stack, never by recursion.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{Format, Source, Span};
use crate::value::{Key, Kind, Map, Number, Value};

/// Limits on what one topology file may contain.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_depth: usize,
    /// Values in the tree, counting each alias expansion in full.
    pub max_values: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 16 << 20,
            max_depth: 64,
            max_values: 1_000_000,
        }
    }
}

/// Turns raw bytes into a [`Source`], or explains why they are not text.
pub fn decode(
    name: &str,
    bytes: Vec<u8>,
    format: Option<Format>,
) -> Result<Source, Box<Diagnostic>> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(match format {
            Some(f) => Source::with_format(name, text, f),
            None => Source::new(name, text),
        }),
        Err(err) => {
            let at = err.utf8_error().valid_up_to();
            Err(Box::new(
                Diagnostic::error(
                    Code::NotText,
                    None,
                    format!("`{name}` is not UTF-8 text (invalid byte at offset {at})"),
                )
                .hint("topology files are JSON or YAML text; is this the right file?"),
            ))
        }
    }
}

/// Parses a source into a value tree with default limits.
pub fn parse(source: &Source) -> Result<Value, Vec<Diagnostic>> {
    parse_with(source, Limits::default())
}

pub fn parse_with(source: &Source, limits: Limits) -> Result<Value, Vec<Diagnostic>> {
    let text = source.text();
    if text.len() > limits.max_bytes {
        return Err(vec![
            Diagnostic::error(
                Code::TooLarge,
                None,
                format!(
                    "file is {} bytes, more than the limit of {}",
                    text.len(),
                    limits.max_bytes
                ),
            )
            .hint("split the topology, or move large data out of `config`"),
        ]);
    }
    if text.contains('\0') {
        let at = text.find('\0').unwrap_or(0);
        return Err(vec![
            Diagnostic::error(
                Code::NotText,
                Span::new(at, at + 1),
                "file contains a NUL byte, so it is not a text topology",
            )
            .hint("topology files are JSON or YAML text; is this the right file?"),
        ]);
    }
    if text.trim_start_matches('\u{feff}').trim().is_empty() {
        return Err(vec![empty()]);
    }
    if source.format() == Format::Json {
        check_json(source, limits)?;
    }
    Builder::new(source, limits).run()
}

fn empty() -> Diagnostic {
    Diagnostic::error(Code::Empty, None, "file is empty")
        .hint("a topology needs at least `topology_id`, `version` and `nodes`")
}

/// JSON syntax check with serde_json's messages (which name JSON tokens).
fn check_json(source: &Source, limits: Limits) -> Result<(), Vec<Diagnostic>> {
    let mut de = serde_json::Deserializer::from_str(source.text());
    let result =
        serde::de::Deserialize::deserialize(&mut de).and_then(|_: serde::de::IgnoredAny| de.end());
    let Err(err) = result else { return Ok(()) };
    let offset = source.offset_of(err.line(), err.column());
    let full = err.to_string();
    let message = full
        .rsplit_once(" at line ")
        .map_or(full.as_str(), |(m, _)| m)
        .to_string();
    let diagnostic = if message.contains("recursion limit") {
        too_deep(Span::new(offset, offset + 1), limits)
    } else if err.is_eof() {
        Diagnostic::error(
            Code::SyntaxError,
            Span::new(offset, offset),
            format!("invalid JSON: {message}"),
        )
        .hint("the file ends early: look for an unclosed `{`, `[` or string")
    } else if trailing_comma(source.text(), offset) {
        Diagnostic::error(
            Code::SyntaxError,
            Span::new(offset, offset + 1),
            "invalid JSON: trailing comma before the closing bracket",
        )
        .hint("JSON does not allow a comma before `}` or `]`; remove it")
    } else {
        let hint = if message.contains("trailing comma") {
            "JSON does not allow a comma before `}` or `]`"
        } else if message.contains("key must be a string") {
            "JSON keys must be in double quotes"
        } else {
            "check the JSON syntax at this position (or use YAML, which is less strict)"
        };
        Diagnostic::error(
            Code::SyntaxError,
            Span::new(offset, offset + 1),
            format!("invalid JSON: {message}"),
        )
        .hint(hint)
    };
    Err(vec![diagnostic])
}

/// Whether the JSON error at `offset` is a closing bracket right after a comma.
fn trailing_comma(text: &str, offset: usize) -> bool {
    let closes = matches!(text.as_bytes().get(offset), Some(b']' | b'}'));
    let before = text.get(..offset).map(|t| t.trim_end().ends_with(','));
    closes && before == Some(true)
}

enum Frame {
    Seq {
        items: Vec<Value>,
        start: usize,
        anchor: usize,
    },
    Map {
        map: Map,
        key: Option<Key>,
        start: usize,
        anchor: usize,
    },
}

struct Builder<'a> {
    source: &'a Source,
    limits: Limits,
    stack: Vec<Frame>,
    /// Anchored values and their size in values, for alias expansion.
    anchors: HashMap<usize, (Value, usize)>,
    values: usize,
    root: Option<Value>,
    documents: usize,
}

impl<'a> Builder<'a> {
    fn new(source: &'a Source, limits: Limits) -> Self {
        Builder {
            source,
            limits,
            stack: Vec::new(),
            anchors: HashMap::new(),
            values: 0,
            root: None,
            documents: 0,
        }
    }

    fn offset(&self, m: &saphyr_parser::Marker) -> usize {
        self.source.offset_of(m.line(), m.col() + 1)
    }

    fn run(mut self) -> Result<Value, Vec<Diagnostic>> {
        let mut parser = Parser::new_from_str(self.source.text());
        while let Some(next) = parser.next_event() {
            let (event, span) = match next {
                Ok(ev) => ev,
                Err(err) => {
                    let at = self.offset(err.marker());
                    if err.info().contains("recursion") {
                        return Err(vec![too_deep(Span::new(at, at + 1), self.limits)]);
                    }
                    return Err(vec![
                        Diagnostic::error(
                            Code::SyntaxError,
                            Span::new(at, at + 1),
                            format!("invalid {}: {}", self.source.format(), err.info()),
                        )
                        .hint(syntax_hint(self.source.format(), err.info())),
                    ]);
                }
            };
            let span = Span::new(self.offset(&span.start), self.offset(&span.end));
            self.event(event, span)?;
        }
        self.root.ok_or_else(|| vec![empty()])
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), Vec<Diagnostic>> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(vec![
                        Diagnostic::error(
                            Code::MultipleDocuments,
                            span,
                            "file holds more than one YAML document",
                        )
                        .hint("put one topology per file (remove the second `---`)"),
                    ]);
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let forced_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let kind = if style == ScalarStyle::Plain && !forced_str {
                    resolve_plain(&text)
                } else {
                    Kind::Str(text.into_owned())
                };
                self.push(Value::new(kind, span), anchor, 1)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.open(
                    Frame::Seq {
                        items: Vec::new(),
                        start: span.start,
                        anchor,
                    },
                    span,
                )?;
            }
            Event::MappingStart(anchor, _) => {
                self.open(
                    Frame::Map {
                        map: Map::default(),
                        key: None,
                        start: span.start,
                        anchor,
                    },
                    span,
                )?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = self.stack.pop() else {
                    return Ok(());
                };
                let (value, anchor) = match frame {
                    Frame::Seq {
                        items,
                        start,
                        anchor,
                    } => (
                        Value::new(Kind::Seq(items), Span::new(start, span.end)),
                        anchor,
                    ),
                    Frame::Map {
                        map, start, anchor, ..
                    } => (
                        Value::new(Kind::Map(map), Span::new(start, span.end)),
                        anchor,
                    ),
                };
                // The container itself was counted when it opened.
                self.push(value, anchor, 0)?;
            }
            Event::Alias(id) => {
                let Some((value, size)) = self.anchors.get(&id).cloned() else {
                    return Err(vec![
                        Diagnostic::error(
                            Code::SyntaxError,
                            span,
                            "alias refers to an anchor that is not defined before it",
                        )
                        .hint("define the anchor (`&name`) before using the alias (`*name`)"),
                    ]);
                };
                self.count(size, span)?;
                // Point the copy at the alias, so errors inside it land here.
                let value = Value { span, ..value };
                self.attach(value, span)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame, span: Span) -> Result<(), Vec<Diagnostic>> {
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(vec![
                Diagnostic::error(
                    Code::SyntaxError,
                    span,
                    "map keys must be plain strings, not lists or maps",
                )
                .hint("use a string key"),
            ]);
        }
        if self.stack.len() >= self.limits.max_depth {
            return Err(vec![too_deep(
                Span::new(span.start, span.start + 1),
                self.limits,
            )]);
        }
        self.count(1, span)?;
        self.stack.push(frame);
        Ok(())
    }

    fn count(&mut self, n: usize, span: Span) -> Result<(), Vec<Diagnostic>> {
        self.values = self.values.saturating_add(n);
        if self.values > self.limits.max_values {
            return Err(
                vec![Diagnostic::error(
                Code::TooLarge,
                Span::new(span.start, span.start + 1),
                format!(
                    "document expands to more than {} values (YAML aliases are counted in full)",
                    self.limits.max_values
                ),
            )
            .hint("this looks like an alias bomb; avoid nesting aliases of aliases")],
            );
        }
        Ok(())
    }

    fn push(&mut self, value: Value, anchor: usize, cost: usize) -> Result<(), Vec<Diagnostic>> {
        self.count(cost, value.span)?;
        if anchor != 0 {
            let size = size_of(&value);
            self.anchors.insert(anchor, (value.clone(), size));
        }
        let span = value.span;
        self.attach(value, span)
    }

    fn attach(&mut self, value: Value, span: Span) -> Result<(), Vec<Diagnostic>> {
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(value);
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                None => {
                    let name = match value.kind {
                        Kind::Str(s) => s,
                        Kind::Null => "null".to_string(),
                        Kind::Bool(b) => b.to_string(),
                        Kind::Number(n) => n.raw,
                        Kind::Seq(_) | Kind::Map(_) => {
                            return Err(vec![Diagnostic::error(
                                Code::SyntaxError,
                                span,
                                "map keys must be plain strings, not lists or maps",
                            )]);
                        }
                    };
                    if let Some(first) = map.key(&name) {
                        return Err(vec![
                            Diagnostic::error(
                                Code::DuplicateKey,
                                span,
                                format!("key `{name}` appears twice in the same map"),
                            )
                            .related(first.span, "first defined here")
                            .hint("remove one of them; only one value can apply"),
                        ]);
                    }
                    *key = Some(Key { name, span });
                }
                Some(k) => map.entries.push((k, value)),
            },
        }
        Ok(())
    }
}

fn too_deep(span: Span, limits: Limits) -> Diagnostic {
    Diagnostic::error(
        Code::TooDeep,
        span,
        format!("nesting is deeper than the limit of {}", limits.max_depth),
    )
    .hint("topologies are shallow; this looks like generated or corrupted input")
}

fn syntax_hint(format: Format, info: &str) -> String {
    if info.contains("tab") {
        "YAML indentation must use spaces, not tabs".into()
    } else if info.contains("mapping values are not allowed") {
        "a value containing `: ` must be quoted".into()
    } else if format == Format::Yaml {
        "check indentation and quoting near this position".into()
    } else {
        "check the syntax near this position".into()
    }
}

fn size_of(value: &Value) -> usize {
    let mut n = 0;
    let mut todo = vec![value];
    while let Some(v) = todo.pop() {
        n += 1;
        match &v.kind {
            Kind::Seq(items) => todo.extend(items),
            Kind::Map(map) => todo.extend(map.entries.iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    n
}

/// YAML 1.2 core schema resolution of a plain scalar.
fn resolve_plain(text: &str) -> Kind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Kind::Null,
        "true" | "True" | "TRUE" => return Kind::Bool(true),
        "false" | "False" | "FALSE" => return Kind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Kind::Number(Number {
                raw: text.to_string(),
            });
        }
        _ => {}
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(n) = i64::from_str_radix(hex, 16)
    {
        return Kind::Number(Number { raw: n.to_string() });
    }
    if let Some(oct) = text.strip_prefix("0o")
        && let Ok(n) = i64::from_str_radix(oct, 8)
    {
        return Kind::Number(Number { raw: n.to_string() });
    }
    if is_decimal_literal(text) {
        return Kind::Number(Number {
            raw: text.to_string(),
        });
    }
    Kind::Str(text.to_string())
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn is_decimal_literal(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - s;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Result<Value, Vec<Diagnostic>> {
        parse(&Source::new("t.yaml", text))
    }

    fn json(text: &str) -> Result<Value, Vec<Diagnostic>> {
        parse(&Source::new("t.json", text))
    }

    #[test]
    fn json_and_yaml_give_the_same_tree_shape() {
        let a = json(r#"{"a": [1, "x", true, null, 0.5]}"#)
            .unwrap()
            .to_json();
        let b = yaml("a: [1, x, true, ~, 0.5]").unwrap().to_json();
        assert_eq!(a, b);
    }

    #[test]
    fn compact_json_keys_parse() {
        let v = json(r#"{"id":"route","n":{"k":1}}"#).unwrap();
        assert_eq!(v.to_json()["n"]["k"], 1);
    }

    #[test]
    fn spans_point_at_values() {
        let src = Source::new("t.yaml", "a: 1\nb:\n  c: hello\n");
        let v = parse(&src).unwrap();
        let c = v
            .as_map()
            .unwrap()
            .get("b")
            .unwrap()
            .as_map()
            .unwrap()
            .get("c")
            .unwrap();
        assert_eq!(src.line_col(c.span.start), (3, 6));
        let j = Source::new("t.json", "{\n  \"a\": {\"b\": \"x\"}\n}");
        let v = parse(&j).unwrap();
        let b = v
            .as_map()
            .unwrap()
            .get("a")
            .unwrap()
            .as_map()
            .unwrap()
            .get("b")
            .unwrap();
        assert_eq!(j.line_col(b.span.start), (2, 14));
    }

    #[test]
    fn quoted_scalars_stay_strings() {
        let v = yaml("a: '1'\nb: \"true\"\nc: !!str 2").unwrap().to_json();
        assert_eq!(v["a"], "1");
        assert_eq!(v["b"], "true");
        assert_eq!(v["c"], "2");
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let err = yaml("a: 1\na: 2").unwrap_err();
        assert_eq!(err[0].code, Code::DuplicateKey);
        assert_eq!(err[0].related.len(), 1);
    }

    #[test]
    fn alias_bomb_is_bounded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let err = yaml(&text).unwrap_err();
        assert_eq!(err[0].code, Code::TooLarge);
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let deep = "[".repeat(100_000);
        assert_eq!(yaml(&deep).unwrap_err()[0].code, Code::TooDeep);
        let closed = "[".repeat(100_000) + &"]".repeat(100_000);
        assert_eq!(json(&closed).unwrap_err()[0].code, Code::TooDeep);
        assert_eq!(json(&deep).unwrap_err()[0].code, Code::SyntaxError);
        let deep_map = "{\"a\":".repeat(70) + "1" + &"}".repeat(70);
        assert_eq!(json(&deep_map).unwrap_err()[0].code, Code::TooDeep);
    }

    #[test]
    fn empty_and_binary_inputs_are_errors() {
        assert_eq!(yaml("").unwrap_err()[0].code, Code::Empty);
        assert_eq!(yaml("# only a comment\n").unwrap_err()[0].code, Code::Empty);
        assert_eq!(yaml("a\0b").unwrap_err()[0].code, Code::NotText);
        assert_eq!(
            decode("x", vec![0xff, 0xfe, 0x00], None).unwrap_err().code,
            Code::NotText
        );
    }

    #[test]
    fn json_syntax_errors_have_positions() {
        let src = Source::new("t.json", "{\n  \"a\": 1,\n}");
        let err = parse(&src).unwrap_err();
        assert_eq!(err[0].code, Code::SyntaxError);
        let span = err[0].span.unwrap();
        assert_eq!(src.line_col(span.start).0, 3);
    }

    #[test]
    fn plain_scalar_resolution() {
        assert!(matches!(resolve_plain("12"), Kind::Number(_)));
        assert!(matches!(resolve_plain("-1.5e3"), Kind::Number(_)));
        assert!(matches!(resolve_plain("1.2.3"), Kind::Str(_)));
        assert!(matches!(resolve_plain("e5"), Kind::Str(_)));
        assert!(matches!(resolve_plain("0x1F"), Kind::Number(_)));
    }
}
