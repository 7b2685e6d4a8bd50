//! JSON and YAML into one spanned [`Value`] tree, safely.
//!
//! Both formats go through the YAML 1.2 event parser (`saphyr-parser`; JSON is
//! YAML's flow subset), so locations are exact for both. JSON input is first
//! checked by `serde_json`, whose syntax errors read better for JSON users.
//!
//! Hostile input is bounded, not trusted: the file size, the nesting depth and
//! the number of values after alias expansion all have limits, so a YAML alias
//! bomb or a megabyte of `[` gets an error instead of exhausting memory or the
//! stack. The tree is built with an explicit stack, never by recursion
//! (the `builder` submodule, which also resolves plain scalars).

use crate::diagnostic::{Code, Diagnostic};
use crate::source::{Format, Source, Span};
use crate::value::Value;

mod builder;
mod limits;

use builder::Builder;
pub use limits::Limits;
use limits::{empty, too_deep};

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

#[cfg(test)]
mod tests;
