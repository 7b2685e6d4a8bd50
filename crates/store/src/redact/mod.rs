//! Redaction and truncation of everything a trace stores or an API shows.
//!
//! One pass for every field (issue #33): summaries ([`Redactor::apply`]:
//! secrets first, then the length cap, so a cut can never leave half a key
//! unredacted), and every string inside structured fields (error records
//! with upstream bodies, tags, labels, paths, explanations:
//! [`Redactor::json`]; topology specs shown by the API:
//! [`Redactor::redact_value`]). It runs in the writer thread, off the
//! request path.
//!
//! Main types: [`RedactOptions`] (what to apply), [`Redactor`] (compiled, one
//! per writer) and the built-in [`DETECTORS`]. Why this shape:
//! - One [`RegexSet`] scan says whether anything applies; most summaries
//!   match nothing and cost exactly that scan.
//! - A regex only proposes candidates; checksums ([`checksum`]: Luhn, mod 97,
//!   mod 11-2) run on candidates alone, so a 16-digit order number that fails
//!   Luhn stays readable and the common path never pays for them.
//! - Detectors run in priority order over the text the earlier ones left
//!   unmasked, so a spaced card is masked whole as `card`, never in pieces as
//!   `phone`, and a placeholder can never be matched again.

mod cards;
mod checksum;
mod detectors;
mod forms;

use std::borrow::Cow;
use std::ops::Range;

use regex::{Regex, RegexSet};
use serde_json::Value;

pub use detectors::{DETECTORS, Detector};

use crate::error::{Result, StoreError};
use detectors::Check;

/// What to redact and how long a stored summary may be.
#[derive(Debug, Clone)]
pub struct RedactOptions {
    /// Longest stored summary, in characters (the cut is marked with `…`).
    pub max_summary_chars: usize,
    /// Apply the built-in detectors ([`DETECTORS`]).
    pub builtin: bool,
    /// Built-in detectors to leave out, by id (`uk_nino`) or by label
    /// (`phone` leaves out every phone detector). Unknown names are an error.
    pub disabled: Vec<String>,
    /// Your own detectors: each match becomes `[REDACTED:<name>]`. They run
    /// after the built-in ones, on the text those left unmasked.
    pub extra_rules: Vec<RedactRule>,
    /// Unnamed rules: each regex's matches become `[REDACTED]`.
    pub extra_patterns: Vec<String>,
}

impl Default for RedactOptions {
    fn default() -> Self {
        RedactOptions {
            max_summary_chars: 512,
            builtin: true,
            disabled: Vec::new(),
            extra_rules: Vec::new(),
            extra_patterns: Vec::new(),
        }
    }
}

/// A named redaction rule. When the pattern has a group named `secret`, only
/// that group is masked (`token=(?P<secret>\w+)` keeps `token=` readable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactRule {
    /// Shown in the placeholder; ASCII letters, digits, `_`, `-` and `.`.
    pub name: String,
    pub pattern: String,
}

impl RedactRule {
    pub fn new(name: impl Into<String>, pattern: impl Into<String>) -> RedactRule {
        RedactRule {
            name: name.into(),
            pattern: pattern.into(),
        }
    }
}

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    placeholder: String,
    regex: Regex,
    /// Capture index of the `secret` group, if the pattern has one.
    secret: Option<usize>,
    check: Check,
}

/// Compiled rules plus the length cap.
#[derive(Debug, Clone)]
pub struct Redactor {
    rules: Vec<Rule>,
    /// All rules at once: one scan tells whether any rule applies (most
    /// summaries match none), and which.
    any: RegexSet,
    max_chars: usize,
}

impl Redactor {
    /// Compiles the rules; a bad pattern, rule name or disabled name is an
    /// error naming it.
    pub fn new(options: &RedactOptions) -> Result<Redactor> {
        check_disabled(&options.disabled)?;
        let mut rules = Vec::new();
        if options.builtin {
            let off = |d: &Detector| options.disabled.iter().any(|n| n == d.id || n == d.label);
            for d in DETECTORS.iter().filter(|d| !off(d)) {
                rules.push(Rule::new(
                    format!("[REDACTED:{}]", d.label),
                    d.pattern,
                    d.check,
                )?);
            }
        }
        for rule in &options.extra_rules {
            check_rule_name(&rule.name)?;
            let placeholder = format!("[REDACTED:{}]", rule.name);
            rules.push(Rule::new(placeholder, &rule.pattern, Check::None)?);
        }
        for pattern in &options.extra_patterns {
            rules.push(Rule::new("[REDACTED]".into(), pattern, Check::None)?);
        }
        let any = RegexSet::new(rules.iter().map(|r| r.regex.as_str())).map_err(|e| {
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
        glassbox_trace::truncate(&self.redact(text), self.max_chars)
    }

    /// Redacts without truncating (fields with their own bounds, such as
    /// an error's detail). Borrows when nothing matched: the common case
    /// costs one scan and no copy.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.any.is_match(text) {
            return Cow::Borrowed(text);
        }
        let masks = self.masks(text);
        if masks.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (range, rule) in masks {
            out.push_str(&text[at..range.start]);
            out.push_str(&self.rules[rule].placeholder);
            at = range.end;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// `value` as JSON text with every string in it (keys left as they are)
    /// redacted. One scan of the whole text first: most records hold no
    /// secret, and then this costs the serialisation plus that scan.
    pub fn json<T: serde::Serialize>(&self, value: &T) -> String {
        let text = serde_json::to_string(value)
            .unwrap_or_else(|e| format!("{{\"unserialisable\":\"{e}\"}}"));
        if !self.any.is_match(&text) {
            return text;
        }
        // A rule may match the escaped text without matching any one string
        // (a secret-named key next to its value): redact the strings, and
        // the pair through the text form of each object below.
        match serde_json::from_str::<Value>(&text) {
            Ok(mut v) => {
                self.redact_value(&mut v);
                serde_json::to_string(&v).unwrap_or(text)
            }
            Err(_) => self.redact(&text).into_owned(),
        }
    }

    /// Redacts every string in `value`, in place. A string under a key
    /// that a key-value rule treats as secret (`"password": "..."`) is
    /// caught too: each object member is also checked as its JSON text.
    pub fn redact_value(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(masked) = self.redact(s) {
                    *s = masked;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    let Value::String(s) = v else {
                        self.redact_value(v);
                        continue;
                    };
                    if let Cow::Owned(masked) = self.redact(s) {
                        *s = masked;
                        continue;
                    }
                    // Only the pair gives it away: mask the value whole.
                    let name = Value::from(key.as_str()).to_string();
                    let pair = format!("{name}:{}", Value::from(s.as_str()));
                    let in_value = |(r, _): &(Range<usize>, usize)| r.end > name.len() + 1;
                    if self.any.is_match(&pair) && self.masks(&pair).iter().any(in_value) {
                        *s = "[REDACTED:secret]".into();
                    }
                }
            }
            _ => {}
        }
    }

    /// The spans to mask, sorted and disjoint, each with the rule that found
    /// it. Each rule sees only the gaps between earlier rules' masks.
    fn masks(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let mut masks: Vec<(Range<usize>, usize)> = Vec::new();
        let mut found = Vec::new();
        let mut scratch = Vec::new();
        for index in self.any.matches(text).iter() {
            let rule = &self.rules[index];
            let mut at = 0;
            let end = text.len()..text.len();
            for taken in masks.iter().map(|(r, _)| r).chain([&end]) {
                if at < taken.start {
                    rule.scan(text, at..taken.start, &mut found, &mut scratch);
                }
                at = taken.end;
            }
            if !found.is_empty() {
                masks.extend(found.drain(..).map(|r| (r, index)));
                masks.sort_unstable_by_key(|(r, _)| r.start);
            }
        }
        masks
    }
}

impl Rule {
    fn new(placeholder: String, pattern: &str, check: Check) -> Result<Rule> {
        let regex = Regex::new(pattern).map_err(|e| StoreError::BadPattern {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })?;
        let secret = regex.capture_names().position(|n| n == Some("secret"));
        Ok(Rule {
            placeholder,
            regex,
            secret,
            check,
        })
    }

    /// Pushes the secrets found in `text[gap]` onto `found`, as ranges of `text`.
    fn scan(
        &self,
        text: &str,
        gap: Range<usize>,
        found: &mut Vec<Range<usize>>,
        scratch: &mut Vec<Range<usize>>,
    ) {
        let hay = &text[gap.clone()];
        let mut keep = |m: regex::Match<'_>| {
            let offset = gap.start + m.start();
            let secret = m.as_str();
            if secret.contains("[REDACTED") {
                return; // holds a mask already (a summary redacted twice)
            }
            match self.check {
                Check::None => found.push(offset..offset + secret.len()),
                Check::Valid(valid) => {
                    if valid(secret) {
                        found.push(offset..offset + secret.len());
                    }
                }
                Check::Find(find) => {
                    scratch.clear();
                    find(secret, scratch);
                    // Checks return ASCII positions; never split a character.
                    found.extend(
                        scratch
                            .drain(..)
                            .filter(|r| {
                                secret.is_char_boundary(r.start) && secret.is_char_boundary(r.end)
                            })
                            .map(|r| offset + r.start..offset + r.end),
                    );
                }
            }
        };
        match self.secret {
            None => self
                .regex
                .find_iter(hay)
                .filter(|m| !m.is_empty())
                .for_each(&mut keep),
            Some(group) => self
                .regex
                .captures_iter(hay)
                .filter_map(|c| c.get(group))
                .filter(|m| !m.is_empty())
                .for_each(&mut keep),
        }
    }
}

/// Every name in `disabled` must be a built-in id or label.
fn check_disabled(disabled: &[String]) -> Result<()> {
    let known = |n: &str| DETECTORS.iter().any(|d| d.id == n || d.label == n);
    let unknown: Vec<&str> = disabled
        .iter()
        .map(String::as_str)
        .filter(|n| !known(n))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let mut labels: Vec<&str> = Vec::new();
    for d in DETECTORS {
        if !labels.contains(&d.label) {
            labels.push(d.label);
        }
    }
    let names = unknown
        .iter()
        .map(|n| match closest(n) {
            Some(near) => format!("`{n}` (did you mean `{near}`?)"),
            None => format!("`{n}`"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(StoreError::BadRedactRule {
        rule: names,
        message: format!(
            "no such built-in detector (hint: disable one by id, or by label: {})",
            labels.join(", ")
        ),
    })
}

/// The built-in id or label nearest to a mistyped name, if one is close.
fn closest(name: &str) -> Option<&'static str> {
    DETECTORS
        .iter()
        .flat_map(|d| [d.id, d.label])
        .map(|known| (edit_distance(name, known), known))
        .filter(|&(d, _)| d <= 2)
        .min_by_key(|&(d, _)| d)
        .map(|(_, known)| known)
}

/// Levenshtein distance, for the hint above.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

fn check_rule_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        return Ok(());
    }
    Err(StoreError::BadRedactRule {
        rule: format!("`{name}`"),
        message: "a rule name is 1-40 ASCII letters, digits, `_`, `-` or `.` (it is shown in `[REDACTED:<name>]`)".into(),
    })
}

#[cfg(test)]
mod tests;
