//! Redaction and truncation of summaries before they are stored.
//!
//! Summaries are the only free text a store keeps from users' requests, so
//! they pass through these rules in the writer thread (off the request path):
//! secrets first, then the length cap, so a cut can never leave half a key
//! unredacted.

use regex::{Regex, RegexSet};

use crate::error::{Result, StoreError};

/// What to redact and how long a stored summary may be.
#[derive(Debug, Clone)]
pub struct RedactOptions {
    /// Longest stored summary, in characters (the cut is marked with `…`).
    pub max_summary_chars: usize,
    /// Apply the built-in rules (API keys, e-mail addresses, phone numbers).
    pub builtin: bool,
    /// More rules: each regex's matches become `[REDACTED]`.
    pub extra_patterns: Vec<String>,
}

impl Default for RedactOptions {
    fn default() -> Self {
        RedactOptions {
            max_summary_chars: 512,
            builtin: true,
            extra_patterns: Vec::new(),
        }
    }
}

/// The built-in rules: (name, pattern). The name appears in the placeholder.
pub const BUILTIN_RULES: &[(&str, &str)] = &[
    // Provider-style keys: sk-..., sk-proj-..., pk_live_..., rk_..., xoxb-...
    (
        "api_key",
        r"\b(?:sk|pk|rk)[-_](?:live[-_]|test[-_]|proj[-_])?[A-Za-z0-9_-]{16,}",
    ),
    ("api_key", r"\bAKIA[0-9A-Z]{16}\b"),
    (
        "api_key",
        r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{16,}",
    ),
    ("api_key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("api_key", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*"),
    (
        "api_key",
        r#"(?i)\b(?:api[_-]?key|secret|access[_-]?token|auth[_-]?token|password)\b["']?\s*[:=]\s*["']?[^\s"',;]{6,}"#,
    ),
    (
        "email",
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
    ),
    // International or grouped numbers: +1 415 555 0100, (415) 555-0100, 415-555-0100.
    (
        "phone",
        r"(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?|\b\d{2,4}[\s.-])\d{3,4}[\s.-]\d{3,4}\b",
    ),
    // Mainland China mobile numbers.
    ("phone", r"\b1[3-9]\d{9}\b"),
];

/// Compiled rules plus the length cap.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<(String, Regex)>,
    /// All rules at once: one scan tells whether any rule applies (most
    /// summaries match none).
    any: RegexSet,
    max_chars: usize,
}

impl Redactor {
    /// Compiles the rules; a bad extra pattern is an error naming it.
    pub fn new(options: &RedactOptions) -> Result<Redactor> {
        let mut rules = Vec::new();
        if options.builtin {
            for (name, pattern) in BUILTIN_RULES {
                rules.push((format!("[REDACTED:{name}]"), compile(pattern)?));
            }
        }
        for pattern in &options.extra_patterns {
            rules.push(("[REDACTED]".to_string(), compile(pattern)?));
        }
        let any = RegexSet::new(rules.iter().map(|(_, re)| re.as_str())).map_err(|e| {
            StoreError::BadPattern {
                pattern: "(the combined rules)".into(),
                message: e.to_string(),
            }
        })?;
        Ok(Redactor {
            rules,
            any,
            max_chars: options.max_summary_chars,
        })
    }

    /// Redacts, then truncates.
    pub fn apply(&self, text: &str) -> String {
        if !self.any.is_match(text) {
            return glassbox_trace::truncate(text, self.max_chars);
        }
        let mut out = std::borrow::Cow::Borrowed(text);
        for (placeholder, re) in &self.rules {
            if re.is_match(&out) {
                out = std::borrow::Cow::Owned(
                    re.replace_all(&out, placeholder.as_str()).into_owned(),
                );
            }
        }
        glassbox_trace::truncate(&out, self.max_chars)
    }
}

fn compile(pattern: &str) -> Result<Regex> {
    Regex::new(pattern).map_err(|e| StoreError::BadPattern {
        pattern: pattern.to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r() -> Redactor {
        Redactor::new(&RedactOptions::default()).unwrap()
    }

    #[test]
    fn redacts_keys_emails_and_phones() {
        let out = r().apply(
            "key sk-proj-abcdefghijklmnop1234 mail ann.lee@example.co.uk call +1 415 555 0100 or 13812345678",
        );
        assert!(!out.contains("abcdefghijklmnop"), "{out}");
        assert!(!out.contains("example.co.uk"), "{out}");
        assert!(!out.contains("555"), "{out}");
        assert!(!out.contains("13812345678"), "{out}");
        assert!(out.contains("[REDACTED:api_key]"), "{out}");
        assert!(out.contains("[REDACTED:email]"), "{out}");
        assert!(out.contains("[REDACTED:phone]"), "{out}");
    }

    #[test]
    fn leaves_ordinary_text_and_numbers_alone() {
        let text = "what is the price of plan 3 in 2024? about 1200 tokens";
        assert_eq!(r().apply(text), text);
    }

    #[test]
    fn redacts_before_truncating() {
        let red = Redactor::new(&RedactOptions {
            max_summary_chars: 12,
            ..RedactOptions::default()
        })
        .unwrap();
        assert_eq!(red.apply("ann@example.com and more"), "[REDACTED:em…");
    }

    #[test]
    fn extra_patterns_apply_and_bad_ones_are_named() {
        let red = Redactor::new(&RedactOptions {
            extra_patterns: vec![r"\bEMP-\d{4}\b".into()],
            ..RedactOptions::default()
        })
        .unwrap();
        assert_eq!(red.apply("id EMP-1234"), "id [REDACTED]");
        let err = Redactor::new(&RedactOptions {
            extra_patterns: vec!["(".into()],
            ..RedactOptions::default()
        })
        .unwrap_err();
        assert_eq!(err.code(), "store_bad_pattern");
    }
}
