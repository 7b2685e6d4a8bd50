//! Source files and byte spans, with line:column lookup.

use std::fmt;
use std::sync::Arc;

/// A byte range in a [`Source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start,
            end: end.max(start),
        }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// The smallest span covering both.
    pub fn join(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// The format a topology file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// Picks the format from a file extension; `None` for anything else.
    pub fn from_path(path: &str) -> Option<Format> {
        let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        match ext.as_deref() {
            Some("json") => Some(Format::Json),
            Some("yaml" | "yml") => Some(Format::Yaml),
            _ => None,
        }
    }

    /// Guesses the format from content: JSON starts with `{` or `[`.
    pub fn sniff(text: &str) -> Format {
        match text
            .trim_start_matches('\u{feff}')
            .trim_start()
            .chars()
            .next()
        {
            Some('{' | '[') => Format::Json,
            _ => Format::Yaml,
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        })
    }
}

/// A named source text, shared cheaply between diagnostics.
#[derive(Clone)]
pub struct Source {
    inner: Arc<SourceInner>,
}

struct SourceInner {
    name: String,
    text: String,
    format: Format,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("name", &self.inner.name)
            .field("format", &self.inner.format)
            .field("len", &self.inner.text.len())
            .finish()
    }
}

impl Source {
    /// A source whose format is taken from the name's extension, or sniffed.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let name = name.into();
        let text = text.into();
        let format = Format::from_path(&name).unwrap_or_else(|| Format::sniff(&text));
        Self::with_format(name, text, format)
    }

    pub fn with_format(name: impl Into<String>, text: impl Into<String>, format: Format) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source {
            inner: Arc::new(SourceInner {
                name: name.into(),
                text,
                format,
                line_starts,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn text(&self) -> &str {
        &self.inner.text
    }

    pub fn format(&self) -> Format {
        self.inner.format
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.inner.text.len());
        let line = match self.inner.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.inner.line_starts[line];
        let col = self
            .inner
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// Byte offset of a 1-based line and character column (clamped).
    pub fn offset_of(&self, line: usize, col: usize) -> usize {
        let text = &self.inner.text;
        let Some(&start) = self.inner.line_starts.get(line.saturating_sub(1)) else {
            return text.len();
        };
        let rest = &text[start..];
        let line_text = rest.split('\n').next().unwrap_or("");
        let col_bytes = line_text
            .char_indices()
            .nth(col.saturating_sub(1))
            .map_or(line_text.len(), |(i, _)| i);
        start + col_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let s = Source::new("a.yaml", "ab\nçd: x\n");
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(3), (2, 1));
        // `d` follows a two-byte character.
        assert_eq!(s.line_col(5), (2, 2));
        assert_eq!(s.offset_of(2, 2), 5);
        assert_eq!(s.line_col(999), (3, 1));
    }

    #[test]
    fn format_from_extension_or_content() {
        assert_eq!(Format::from_path("x.JSON"), Some(Format::Json));
        assert_eq!(Format::from_path("x.yml"), Some(Format::Yaml));
        assert_eq!(Format::from_path("-"), None);
        assert_eq!(Format::sniff("  {\"a\":1}"), Format::Json);
        assert_eq!(Format::sniff("a: 1"), Format::Yaml);
    }
}
