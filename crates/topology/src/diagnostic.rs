//! Diagnostics: what is wrong, where, and how to fix it.
//!
//! Validation never stops at the first problem: every stage pushes
//! [`Diagnostic`]s into one list, and a [`Report`] renders them all, each with
//! a stable [`Code`], `file:line:column`, the field path, a message, a hint and
//! a source snippet (via `miette`), or as JSON for tools.

use std::fmt;

use serde::Serialize;

use crate::source::{Source, Span};

/// Stable, machine-readable problem codes (used in JSON output and docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// The file is not valid JSON or YAML.
    SyntaxError,
    /// The file is empty or holds only comments.
    Empty,
    /// The file is not UTF-8 text.
    NotText,
    /// Nesting deeper than the limit.
    TooDeep,
    /// The document is too large (bytes, values, or alias expansion).
    TooLarge,
    /// More than one YAML document in the file.
    MultipleDocuments,
    /// The same key twice in one map.
    DuplicateKey,
    /// A field the format does not define.
    UnknownField,
    /// A required field is absent.
    MissingField,
    /// A field has the wrong type.
    WrongType,
    /// A value has the right type but is not allowed.
    InvalidValue,
    /// A number outside its allowed range.
    OutOfRange,
    /// Two nodes share an id.
    DuplicateId,
    /// A node `type` that no registered kind provides.
    UnknownKind,
    /// A node kind rejected its `config`.
    BadConfig,
    /// An edge or fallback names a node that does not exist.
    UnknownNode,
    /// An edge from a node to itself.
    SelfLoop,
    /// The same edge twice.
    DuplicateEdge,
    /// The edges form a cycle.
    Cycle,
    /// No node without incoming edges.
    NoEntry,
    /// A node no entry can reach.
    Unreachable,
    /// An edge condition that does not parse.
    BadCondition,
    /// A bare-label condition the source node never emits.
    UnknownLabel,
    /// A condition expression reads a variable that does not exist.
    UnknownVariable,
    /// A fallback that names a missing node.
    UnknownFallback,
    /// Fallbacks that lead back to themselves.
    FallbackCycle,
    /// A resource tag with an unknown `type` or missing model.
    BadResource,
    /// A negative or non-numeric price.
    BadPrice,
    /// A response cache that cannot work as written (its similarity model
    /// is not an embedding node, its text does not parse).
    BadCache,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::SyntaxError => "syntax-error",
            Code::Empty => "empty",
            Code::NotText => "not-text",
            Code::TooDeep => "too-deep",
            Code::TooLarge => "too-large",
            Code::MultipleDocuments => "multiple-documents",
            Code::DuplicateKey => "duplicate-key",
            Code::UnknownField => "unknown-field",
            Code::MissingField => "missing-field",
            Code::WrongType => "wrong-type",
            Code::InvalidValue => "invalid-value",
            Code::OutOfRange => "out-of-range",
            Code::DuplicateId => "duplicate-id",
            Code::UnknownKind => "unknown-kind",
            Code::BadConfig => "bad-config",
            Code::UnknownNode => "unknown-node",
            Code::SelfLoop => "self-loop",
            Code::DuplicateEdge => "duplicate-edge",
            Code::Cycle => "cycle",
            Code::NoEntry => "no-entry",
            Code::Unreachable => "unreachable",
            Code::BadCondition => "bad-condition",
            Code::UnknownLabel => "unknown-label",
            Code::UnknownVariable => "unknown-variable",
            Code::UnknownFallback => "unknown-fallback",
            Code::FallbackCycle => "fallback-cycle",
            Code::BadResource => "bad-resource",
            Code::BadPrice => "bad-price",
            Code::BadCache => "bad-cache",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem found in a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    /// Where in the source; `None` for problems of the file as a whole.
    pub span: Option<Span>,
    /// Field path such as `nodes[4].resource.cost_per_call` (empty for the root).
    pub path: String,
    pub message: String,
    pub hint: Option<String>,
    /// Other places worth showing (e.g. the first definition of a duplicate).
    pub related: Vec<(Span, String)>,
}

impl Diagnostic {
    pub fn error(code: Code, span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            severity: Severity::Error,
            span: span.into(),
            path: String::new(),
            message: message.into(),
            hint: None,
            related: Vec::new(),
        }
    }

    pub fn warning(code: Code, span: impl Into<Option<Span>>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, span, message)
        }
    }

    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn maybe_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint.or(self.hint);
        self
    }

    pub fn related(mut self, span: Span, label: impl Into<String>) -> Self {
        self.related.push((span, label.into()));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// "did you mean `x`?" for the closest candidate, if any is close enough.
pub fn did_you_mean<'a>(
    given: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(given, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The closest candidate by Jaro-Winkler similarity (≥ 0.8), if any.
pub fn closest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(given, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// All diagnostics of one source file.
#[derive(Debug, Clone)]
pub struct Report {
    pub source: Source,
    pub diagnostics: Vec<Diagnostic>,
}

/// A diagnostic as written in `--format json`.
#[derive(Debug, Serialize)]
pub struct JsonDiagnostic<'a> {
    pub file: &'a str,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub end_line: Option<usize>,
    pub end_column: Option<usize>,
    pub path: &'a str,
    pub code: Code,
    pub severity: Severity,
    pub message: &'a str,
    pub hint: Option<&'a str>,
}

impl Report {
    pub fn new(source: Source, mut diagnostics: Vec<Diagnostic>) -> Self {
        // Source order reads best; problems of the whole file come first.
        diagnostics.sort_by_key(|d| d.span.map_or(0, |s| s.start + 1));
        Report {
            source,
            diagnostics,
        }
    }

    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }

    pub fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    /// `file:line:column` of a diagnostic.
    pub fn location(&self, d: &Diagnostic) -> String {
        match d.span {
            Some(span) => {
                let (line, col) = self.source.line_col(span.start);
                format!("{}:{line}:{col}", self.source.name())
            }
            None => self.source.name().to_string(),
        }
    }

    pub fn to_json(&self) -> Vec<JsonDiagnostic<'_>> {
        self.diagnostics
            .iter()
            .map(|d| {
                let start = d.span.map(|s| self.source.line_col(s.start));
                let end = d.span.map(|s| self.source.line_col(s.end));
                JsonDiagnostic {
                    file: self.source.name(),
                    line: start.map(|p| p.0),
                    column: start.map(|p| p.1),
                    end_line: end.map(|p| p.0),
                    end_column: end.map(|p| p.1),
                    path: &d.path,
                    code: d.code,
                    severity: d.severity,
                    message: &d.message,
                    hint: d.hint.as_deref(),
                }
            })
            .collect()
    }

    /// Renders every diagnostic with a source snippet. `color` selects ANSI
    /// colours (for terminals); snapshots use plain text.
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            miette::GraphicalTheme::unicode()
        } else {
            miette::GraphicalTheme::unicode_nocolor()
        };
        let handler = miette::GraphicalReportHandler::new_themed(theme)
            .with_width(100)
            .with_links(false)
            .with_context_lines(1);
        let mut out = String::new();
        for d in &self.diagnostics {
            let rendered = Rendered {
                report: self,
                diagnostic: d,
            };
            // Writing into a String cannot fail.
            let _ = handler.render_report(&mut out, &rendered);
        }
        out
    }

    /// Every diagnostic as code, location, message and hint, quoting no
    /// line of the source (for files whose contents must not be shown).
    pub fn render_without_source(&self) -> String {
        let mut out = String::new();
        for d in &self.diagnostics {
            let severity = if d.is_error() { "error" } else { "warning" };
            out.push_str(&format!(
                "{severity}[{}]: {}\n  at {}",
                d.code.as_str(),
                crate::secret::mask_text(&d.message),
                self.location(d)
            ));
            if !d.path.is_empty() {
                out.push_str(&format!(" ({})", d.path));
            }
            out.push('\n');
        }
        out
    }

    /// One-line summary, e.g. `2 errors, 1 warning`.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        format!(
            "{}, {}",
            plural(self.error_count(), "error"),
            plural(self.warning_count(), "warning")
        )
    }
}

/// Adapter that lets miette draw one of our diagnostics.
struct Rendered<'a> {
    report: &'a Report,
    diagnostic: &'a Diagnostic,
}

impl fmt::Debug for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.diagnostic, f)
    }
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.diagnostic;
        write!(f, "{}", d.message)?;
        let location = self.report.location(d);
        if d.path.is_empty() {
            write!(f, "\n  at {location}")
        } else {
            write!(f, "\n  at {location} ({})", d.path)
        }
    }
}

impl std::error::Error for Rendered<'_> {}

impl miette::Diagnostic for Rendered<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diagnostic
            .hint
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.diagnostic
            .span
            .map(|_| &self.report.source as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = miette::LabeledSpan> + '_>> {
        let d = self.diagnostic;
        let span = d.span?;
        let primary = miette::LabeledSpan::new_primary_with_span(
            Some(d.code.as_str().to_string()),
            (span.start, span.len()),
        );
        let related = d.related.iter().map(|(s, label)| {
            miette::LabeledSpan::new_with_span(Some(label.clone()), (s.start, s.len()))
        });
        Some(Box::new(std::iter::once(primary).chain(related)))
    }
}

impl miette::SourceCode for Source {
    fn read_span<'a>(
        &'a self,
        span: &miette::SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn miette::SpanContents<'a> + 'a>, miette::MietteError> {
        let contents = self
            .text()
            .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(miette::MietteSpanContents::new_named(
            self.name().to_string(),
            contents.data(),
            *contents.span(),
            contents.line(),
            contents.column(),
            contents.line_count(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("retrive", ["retrieve", "route"]).as_deref(),
            Some("did you mean `retrieve`?")
        );
        assert_eq!(did_you_mean("zzz", ["retrieve", "route"]), None);
    }

    #[test]
    fn renders_location_hint_and_snippet() {
        let source = Source::new("t.yaml", "a: 1\nb: 2\n");
        let d = Diagnostic::error(Code::UnknownField, Span::new(5, 6), "unknown field `b`")
            .at("b")
            .hint("remove it");
        let report = Report::new(source, vec![d]);
        let text = report.render(false);
        assert!(text.contains("unknown-field"), "{text}");
        assert!(text.contains("t.yaml:2:1"), "{text}");
        assert!(text.contains("remove it"), "{text}");
        assert!(text.contains("b: 2"), "{text}");
        assert_eq!(report.summary(), "1 error, 0 warnings");
    }
}
