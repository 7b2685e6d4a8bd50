//! Edge conditions: a bare label, or a CEL expression.
//!
//! A bare identifier (`need_retrieval`) names a label the source node emits;
//! anything else is a [CEL](https://cel.dev) expression over `input` (the
//! request input), `outputs` (finished nodes' outputs by node id) and `labels`
//! (the label each finished node emitted). CEL was chosen over a home-made
//! language because it is standard (Kubernetes, Envoy), side-effect free and
//! always terminates, which is what a routing condition should be.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value as Json};

/// Variables a condition expression may read.
pub const VARIABLES: [&str; 3] = ["input", "outputs", "labels"];

/// A parsed edge condition.
#[derive(Clone)]
pub enum Condition {
    /// Taken when the source node emitted this label.
    Label(String),
    /// Taken when the expression evaluates to `true`.
    Expr(Expr),
}

impl fmt::Debug for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Label(l) => write!(f, "Label({l:?})"),
            Condition::Expr(e) => write!(f, "Expr({:?})", e.source),
        }
    }
}

impl Condition {
    /// The text as written in the topology.
    pub fn as_str(&self) -> &str {
        match self {
            Condition::Label(l) => l,
            Condition::Expr(e) => &e.source,
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A compiled CEL expression.
#[derive(Clone)]
pub struct Expr {
    pub source: String,
    program: Arc<cel::Program>,
    variables: Vec<String>,
}

/// Shown as its source text (the compiled program has nothing to add).
impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Expr").field(&self.source).finish()
    }
}

/// Why a condition could not be parsed: message and 1-based line/column
/// within the condition text.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionSyntaxError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Why a condition could not be evaluated at run time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    #[error("condition `{source_text}` failed: {message}")]
    Failed {
        source_text: String,
        message: String,
    },
    #[error("condition `{source_text}` returned {found}, not a boolean")]
    NotBool { source_text: String, found: String },
    #[error("expression `{source_text}` returned {found}, not a string")]
    NotString { source_text: String, found: String },
}

impl EvalError {
    pub fn code(&self) -> &'static str {
        match self {
            EvalError::Failed { .. } => "condition_failed",
            EvalError::NotBool { .. } => "condition_not_bool",
            EvalError::NotString { .. } => "expression_not_string",
        }
    }
}

fn is_label(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !matches!(text, "true" | "false" | "null")
}

impl Condition {
    /// Parses condition text: a bare identifier is a label, the rest is CEL.
    pub fn parse(text: &str) -> Result<Condition, ConditionSyntaxError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ConditionSyntaxError {
                message: "condition is empty".into(),
                line: 1,
                column: 1,
            });
        }
        if is_label(trimmed) {
            return Ok(Condition::Label(trimmed.to_string()));
        }
        Expr::compile(trimmed).map(Condition::Expr)
    }
}

/// The longest CEL expression a topology may hold.
pub const MAX_EXPR_CHARS: usize = 2048;
/// The deepest nesting of brackets in one: CEL's parser recurses per level.
pub const MAX_EXPR_DEPTH: usize = 32;

/// CEL always terminates, but not always soon: a comprehension (`all`,
/// `exists`, `exists_one`, `map`, `filter`) nested in another multiplies
/// the sizes of lists a caller controls (`input.a.all(x, input.a.all(y, …))`
/// over 100,000 items is 10^10 steps). Expressions are therefore bounded
/// in length and depth, and comprehensions may not nest: evaluation stays
/// linear in the input (issue 33). Lexical, like [`read_paths`]: string
/// literals are skipped.
fn check_bounds(text: &str) -> Result<(), ConditionSyntaxError> {
    let err = |message: String, column: usize| ConditionSyntaxError {
        message,
        line: 1,
        column,
    };
    let chars = text.chars().count();
    if chars > MAX_EXPR_CHARS {
        return Err(err(
            format!("the expression has {chars} characters, more than {MAX_EXPR_CHARS}"),
            1,
        ));
    }
    const MACROS: [&str; 5] = ["all(", "exists(", "exists_one(", "map(", "filter("];
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    // Depths at which a comprehension's parentheses opened.
    let mut macros: Vec<usize> = Vec::new();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' => quote = Some(c),
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_EXPR_DEPTH {
                    return Err(err(
                        format!("brackets nest deeper than {MAX_EXPR_DEPTH} levels"),
                        i + 1,
                    ));
                }
                let before = &text[..i + 1];
                let is_macro =
                    c == b'(' && MACROS.iter().any(|m| before.ends_with(&format!(".{m}")));
                if is_macro {
                    if !macros.is_empty() {
                        return Err(err(
                            "a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`) inside another is not allowed: its cost grows with the product of the lists' sizes".into(),
                            i + 1,
                        ));
                    }
                    macros.push(depth);
                }
            }
            b')' | b']' | b'}' => {
                if macros.last() == Some(&depth) {
                    macros.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

impl Expr {
    /// Compiles CEL text (always an expression, even a bare identifier),
    /// within the bounds of [`check_bounds`].
    pub fn compile(text: &str) -> Result<Expr, ConditionSyntaxError> {
        let trimmed = text.trim();
        check_bounds(trimmed)?;
        // CEL's parser is generated code; never let a bug in it take the
        // process down on user input.
        let compiled = std::panic::catch_unwind(|| cel::Program::compile(trimmed));
        match compiled {
            Ok(Ok(program)) => {
                let variables = program
                    .references()
                    .variables()
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                Ok(Expr {
                    source: trimmed.to_string(),
                    program: Arc::new(program),
                    variables,
                })
            }
            Ok(Err(errors)) => {
                let first = errors.errors.first();
                Err(ConditionSyntaxError {
                    message: first.map_or_else(|| "does not parse".into(), |e| e.msg.clone()),
                    line: first.map_or(1, |e| e.pos.0.max(1) as usize),
                    column: first.map_or(1, |e| e.pos.1.max(0) as usize + 1),
                })
            }
            Err(_) => Err(ConditionSyntaxError {
                message: "expression could not be parsed".into(),
                line: 1,
                column: 1,
            }),
        }
    }

    /// Top-level variables the expression reads.
    pub fn variables(&self) -> &[String] {
        &self.variables
    }

    /// Dotted paths under `input`, `outputs` and `labels` that the expression
    /// reads, e.g. `outputs.retrieve.hits`, in order of appearance (each
    /// once). The engine reports their values when it says why an edge was
    /// or was not taken.
    pub fn read_paths(&self) -> Vec<String> {
        read_paths(&self.source)
    }

    /// Evaluates to a string (e.g. which text an embedding node embeds).
    pub fn evaluate_string(
        &self,
        input: &Json,
        outputs: &Map<String, Json>,
        labels: &Map<String, Json>,
    ) -> Result<String, EvalError> {
        let fail = |message: String| EvalError::Failed {
            source_text: self.source.clone(),
            message,
        };
        let mut cx = cel::Context::default();
        cx.add_variable("input", input)
            .map_err(|e| fail(e.to_string()))?;
        cx.add_variable("outputs", outputs)
            .map_err(|e| fail(e.to_string()))?;
        cx.add_variable("labels", labels)
            .map_err(|e| fail(e.to_string()))?;
        match self.program.execute(&cx) {
            Ok(cel::Value::String(s)) => Ok(s.to_string()),
            Ok(other) => Err(EvalError::NotString {
                source_text: self.source.clone(),
                found: format!("{other:?}"),
            }),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// Evaluates to a boolean over the request input, node outputs and labels.
    pub fn evaluate(
        &self,
        input: &Json,
        outputs: &Map<String, Json>,
        labels: &Map<String, Json>,
    ) -> Result<bool, EvalError> {
        let mut cx = cel::Context::default();
        let fail = |message: String| EvalError::Failed {
            source_text: self.source.clone(),
            message,
        };
        cx.add_variable("input", input)
            .map_err(|e| fail(e.to_string()))?;
        cx.add_variable("outputs", outputs)
            .map_err(|e| fail(e.to_string()))?;
        cx.add_variable("labels", labels)
            .map_err(|e| fail(e.to_string()))?;
        match self.program.execute(&cx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(EvalError::NotBool {
                source_text: self.source.clone(),
                found: format!("{other:?}"),
            }),
            Err(e) => Err(fail(e.to_string())),
        }
    }
}

/// Scans CEL text for dotted paths rooted at a [`VARIABLES`] name: a
/// lexical scan that skips string literals and drops a trailing method name
/// (`.contains(`). The paths only feed explanations, never evaluation.
fn read_paths(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == b'"' || c == b'\'' {
            quote = Some(c);
            i += 1;
            continue;
        }
        let at_word_start = i == 0 || !is_ident(bytes[i - 1]) && bytes[i - 1] != b'.';
        if at_word_start && is_ident_start(c) {
            let start = i;
            while i < bytes.len() && (is_ident(bytes[i]) || bytes[i] == b'.') {
                i += 1;
            }
            let word = source[start..i].trim_end_matches('.');
            // A trailing method call (`.contains(`) is not part of the path.
            let word = if i < bytes.len() && bytes[i] == b'(' {
                word.rsplit_once('.').map_or(word, |(head, _)| head)
            } else {
                word
            };
            let root = word.split('.').next().unwrap_or("");
            if VARIABLES.contains(&root) && word.contains('.') && !out.iter().any(|w| w == word) {
                out.push(word.to_string());
            }
            continue;
        }
        i += 1;
    }
    out
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

#[cfg(test)]
mod tests {
    /// Issue 33: CEL is bounded in size, depth and comprehension nesting.
    #[test]
    fn expressions_are_bounded_in_size_and_nesting() {
        let long = format!("input.q == '{}'", "x".repeat(MAX_EXPR_CHARS));
        let e = super::Expr::compile(&long).err().unwrap();
        assert!(e.message.contains("more than 2048"), "{}", e.message);
        let deep = format!("{}1{} == 1", "(".repeat(40), ")".repeat(40));
        let e = super::Expr::compile(&deep).err().unwrap();
        assert!(e.message.contains("deeper than 32"), "{}", e.message);
        let nested = "input.a.all(x, input.a.exists(y, x == y))";
        let e = super::Expr::compile(nested).err().unwrap();
        assert!(e.message.contains("inside another"), "{}", e.message);
        assert_eq!(e.column, 30);
        // One level, side by side, and macro names inside strings are fine.
        for ok in [
            "input.a.all(x, x > 0) && input.b.exists(y, y == 'map(')",
            "size(input.a.filter(x, x > 1)) > 0",
        ] {
            assert!(super::Expr::compile(ok).is_ok(), "{ok}");
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn bare_identifiers_are_labels() {
        assert!(
            matches!(Condition::parse("need_retrieval"), Ok(Condition::Label(l)) if l == "need_retrieval")
        );
        assert!(matches!(Condition::parse("true"), Ok(Condition::Expr(_))));
        assert!(matches!(
            Condition::parse("size(outputs.retrieve.hits) > 5"),
            Ok(Condition::Expr(_))
        ));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let err = Condition::parse("size(outputs.x.hits) >").unwrap_err();
        assert!(err.column >= 1, "{err:?}");
        assert!(!err.message.is_empty());
        assert!(Condition::parse("  ").is_err());
    }

    #[test]
    fn evaluates_over_input_and_outputs() {
        let Ok(Condition::Expr(e)) = Condition::parse(
            r#"size(outputs.retrieve.hits) > 1 && input.question.contains("price")"#,
        ) else {
            panic!("expected expression")
        };
        assert_eq!(e.variables().len(), 2);
        let outputs = json!({"retrieve": {"hits": [1, 2, 3]}});
        let out = outputs.as_object().unwrap();
        let labels = Map::new();
        assert_eq!(
            e.evaluate(&json!({"question": "the price?"}), out, &labels),
            Ok(true)
        );
        assert_eq!(
            e.evaluate(&json!({"question": "hi"}), out, &labels),
            Ok(false)
        );
        let Ok(Condition::Expr(n)) = Condition::parse("1 + 1") else {
            panic!()
        };
        assert!(matches!(
            n.evaluate(&json!({}), out, &labels),
            Err(EvalError::NotBool { .. })
        ));
    }

    #[test]
    fn finds_the_paths_an_expression_reads() {
        let paths = |text: &str| match Expr::compile(text) {
            Ok(e) => e.read_paths(),
            Err(err) => panic!("{text}: {err:?}"),
        };
        assert_eq!(
            paths("size(outputs.retrieve.hits) > 5"),
            vec!["outputs.retrieve.hits"]
        );
        assert_eq!(
            paths(r#"input.question.contains("outputs.x") && labels.route == 'a'"#),
            vec!["input.question", "labels.route"]
        );
        assert_eq!(
            paths("outputs.a.b > 1 || outputs.a.b < 0"),
            vec!["outputs.a.b"]
        );
        assert!(paths("true").is_empty());
    }
}
