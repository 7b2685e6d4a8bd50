//! The tree builder: YAML events into a spanned [`Value`] with an explicit
//! stack, counting depth and expanded size as it goes; plain scalars
//! resolved by YAML 1.2's core schema.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

use super::limits::{Limits, empty, too_deep};
use crate::diagnostic::{Code, Diagnostic};
use crate::source::{Format, Source, Span};
use crate::value::{Key, Kind, Map, Number, Value};

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

pub(super) struct Builder<'a> {
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
    pub(super) fn new(source: &'a Source, limits: Limits) -> Self {
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

    pub(super) fn run(mut self) -> Result<Value, Vec<Diagnostic>> {
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
pub(super) fn resolve_plain(text: &str) -> Kind {
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
