//! A topology source with its secrets overwritten in place (same byte
//! length, so diagnostics' spans still point at the right text), and the
//! masked [`Report`] built over it. It parses the source to find the
//! values, so it sits above both the parser and the diagnostics.

use crate::diagnostic::Report;
use crate::source::Source;

use super::mask::{is_secret_key, mask_text};
use super::reference::has_reference;

impl Report {
    /// The same report over a copy of the source whose secret-bearing
    /// values (header values, keys, tokens, URL userinfo) are overwritten
    /// with `*`: render this one wherever people other than the file's
    /// author read diagnostics (the server's `problems`).
    pub fn masked(&self) -> Report {
        let text = mask_source(self.source.text(), self.source.format());
        let mut diagnostics = self.diagnostics.clone();
        for d in &mut diagnostics {
            d.message = mask_text(&d.message).into_owned();
        }
        Report {
            source: Source::with_format(self.source.name(), text, self.source.format()),
            diagnostics,
        }
    }
}

/// `text` (a topology source) with every secret-bearing value overwritten
/// by `*` of the same byte length, so spans into it stay valid: values
/// under secret keys (see [`mask_config`]) and URL userinfo. Used to render
/// diagnostics with snippets that quote no secret. When the text does not
/// parse, lines of the form `key: value` with a secret key are masked.
pub fn mask_source(text: &str, format: crate::Format) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let source = crate::Source::with_format("masked", text, format);
    match crate::parse::parse(&source) {
        Ok(value) => mask_spans(&value, false, &mut bytes),
        Err(_) => {
            let mut offset = 0;
            for line in text.split_inclusive('\n') {
                if let Some(colon) = line.find(':') {
                    let key = line[..colon]
                        .trim()
                        .trim_matches(['"', '\'', '-', ' ', '{', ',']);
                    if is_secret_key(key) {
                        star(
                            &mut bytes,
                            offset + colon + 1,
                            offset + line.trim_end().len(),
                        );
                    }
                }
                offset += line.len();
            }
        }
    }
    mask_userinfo_in_place(text, &mut bytes);
    // Only ASCII bytes were replaced, at char boundaries: still UTF-8.
    String::from_utf8(bytes).unwrap_or_default()
}

fn mask_spans(value: &crate::Value, secret: bool, bytes: &mut [u8]) {
    use crate::value::Kind;
    match &value.kind {
        Kind::Str(s) if secret && !has_reference(s) => {
            star(bytes, value.span.start, value.span.end);
        }
        Kind::Number(_) | Kind::Bool(_) if secret => star(bytes, value.span.start, value.span.end),
        Kind::Seq(items) => items.iter().for_each(|v| mask_spans(v, secret, bytes)),
        Kind::Map(map) => {
            for (k, v) in &map.entries {
                mask_spans(v, secret || is_secret_key(&k.name), bytes);
            }
        }
        _ => {}
    }
}

/// Overwrites the non-quote, non-space bytes of `start..end` with `*`,
/// whole characters only.
fn star(bytes: &mut [u8], start: usize, end: usize) {
    let end = end.min(bytes.len());
    let mut i = start;
    while i < end {
        let b = bytes[i];
        let width = match b {
            0x00..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xff => 4,
            _ => 1,
        };
        if width == 1 && matches!(b, b'"' | b'\'' | b' ' | b'\n' | b'\r') {
            i += 1;
            continue;
        }
        bytes[i..(i + width).min(end)].fill(b'*');
        i += width;
    }
}

fn mask_userinfo_in_place(text: &str, bytes: &mut [u8]) {
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        let end = text[start..]
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '`' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .map_or(text.len(), |e| start + e);
        if let Some(i) = text[start..end].rfind('@') {
            star(bytes, start, start + i);
        }
        from = end.max(start);
    }
}
