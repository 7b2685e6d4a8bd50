//! Redactor tests; most cases live in `tests/data/redaction-corpus.txt`.

use super::*;

const CORPUS: &str = include_str!("../../tests/data/redaction-corpus.txt");

fn r() -> Redactor {
    Redactor::new(&RedactOptions::default()).unwrap()
}

fn with(options: RedactOptions) -> Redactor {
    Redactor::new(&options).unwrap()
}

/// A corpus positive: the text to redact and what must come back.
struct Positive {
    line: usize,
    input: String,
    expected: String,
    /// (label, secret) for each marked span.
    secrets: Vec<(String, String)>,
}

/// Parses the corpus into positives and negatives (line number, text).
fn corpus() -> (Vec<Positive>, Vec<(usize, String)>) {
    let mut positives = Vec::new();
    let mut negatives = Vec::new();
    for (i, line) in CORPUS.lines().enumerate() {
        let line_no = i + 1;
        let owned = line.replace('⏎', "\n");
        let line = owned.as_str();
        if let Some(text) = line.strip_prefix("- ") {
            negatives.push((line_no, text.to_string()));
        } else if let Some(mut rest) = line.strip_prefix("+ ") {
            let (mut input, mut expected, mut secrets) = (String::new(), String::new(), Vec::new());
            while let Some(open) = rest.find('«') {
                let close = rest[open..].find('»').expect("unclosed «") + open;
                let (label, secret) = rest[open + '«'.len_utf8()..close]
                    .split_once(':')
                    .expect("«label:secret»");
                input.push_str(&rest[..open]);
                expected.push_str(&rest[..open]);
                input.push_str(secret);
                expected.push_str(&format!("[REDACTED:{label}]"));
                secrets.push((label.to_string(), secret.to_string()));
                rest = &rest[close + '»'.len_utf8()..];
            }
            input.push_str(rest);
            expected.push_str(rest);
            assert!(
                !secrets.is_empty(),
                "corpus line {line_no}: a positive marks nothing"
            );
            positives.push(Positive {
                line: line_no,
                input,
                expected,
                secrets,
            });
        } else {
            assert!(
                line.is_empty() || line.starts_with('#'),
                "corpus line {line_no}: starts with neither `+ `, `- ` nor `#`"
            );
        }
    }
    (positives, negatives)
}

#[test]
fn corpus_positives_are_masked_whole_with_their_detector_name() {
    let red = r();
    let (positives, _) = corpus();
    let mut failures = Vec::new();
    for p in &positives {
        let out = red.apply(&p.input);
        if out != p.expected {
            failures.push(format!(
                "line {}:\n   input {}\n  wanted {}\n     got {}",
                p.line, p.input, p.expected, out
            ));
        }
        for (label, secret) in &p.secrets {
            // No run of the secret's digits survives (a partly masked card).
            let digits: String = secret.chars().filter(char::is_ascii_digit).collect();
            if digits.len() >= 4 {
                let out_digits: String = out.chars().filter(char::is_ascii_digit).collect();
                let kept_digits: String = p.expected.chars().filter(char::is_ascii_digit).collect();
                assert!(
                    !out_digits.contains(&digits) || kept_digits.contains(&digits),
                    "line {}: digits of the {label} survive in {out}",
                    p.line
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The figures docs/security.md reports: how many corpus secrets survive
/// redaction (leaked) and how many look-alikes, or readable text around a
/// secret, get masked (over-masked). Fails on any leak.
#[test]
fn corpus_counts_leaked_and_over_masked() {
    let red = r();
    let (positives, negatives) = corpus();
    let secrets: usize = positives.iter().map(|p| p.secrets.len()).sum();
    let mut leaked = Vec::new();
    let mut over_masked = Vec::new();
    for p in &positives {
        let out = red.apply(&p.input);
        let mut leaks_here = false;
        for (label, secret) in &p.secrets {
            // Present in the output more often than the expected text keeps it.
            if out.matches(secret.as_str()).count() > p.expected.matches(secret.as_str()).count() {
                leaked.push(format!("line {}: {label} `{secret}` in {out}", p.line));
                leaks_here = true;
            }
        }
        if !leaks_here && out != p.expected {
            over_masked.push(format!("line {}: {out}", p.line));
        }
    }
    for (line, text) in &negatives {
        let out = red.apply(text);
        if out != *text {
            over_masked.push(format!("line {line}: {out}"));
        }
    }
    println!(
        "redaction corpus: {secrets} secrets in {} lines, {} leaked; {} look-alikes, {} over-masked",
        positives.len(),
        leaked.len(),
        negatives.len(),
        over_masked.len()
    );
    assert!(secrets >= 60 && negatives.len() >= 30);
    assert!(leaked.is_empty(), "leaked:\n{}", leaked.join("\n"));
    assert!(
        over_masked.is_empty(),
        "over-masked:\n{}",
        over_masked.join("\n")
    );
}

#[test]
fn corpus_negatives_are_left_alone() {
    let red = r();
    let (_, negatives) = corpus();
    let failures: Vec<String> = negatives
        .iter()
        .filter_map(|(line, text)| {
            let out = red.apply(text);
            (out != *text).then(|| format!("line {line}:\n   input {text}\n     got {out}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn corpus_has_many_positives_for_every_label_and_exercises_every_detector() {
    let (positives, negatives) = corpus();
    assert!(negatives.len() >= 30, "{} negatives", negatives.len());
    for d in DETECTORS {
        let n = positives
            .iter()
            .flat_map(|p| &p.secrets)
            .filter(|(label, _)| label == d.label)
            .count();
        assert!(n >= 5, "only {n} corpus positives for `{}`", d.label);
    }
    // With a detector switched off, some corpus line must come out
    // differently, or the corpus never reaches it.
    let full = r();
    for d in DETECTORS {
        let without = with(RedactOptions {
            disabled: vec![d.id.to_string()],
            ..RedactOptions::default()
        });
        let reached = positives
            .iter()
            .any(|p| without.apply(&p.input) != full.apply(&p.input));
        assert!(reached, "no corpus positive needs detector `{}`", d.id);
    }
}

#[test]
fn redaction_is_idempotent_on_the_corpus() {
    let red = r();
    let (positives, negatives) = corpus();
    let inputs = positives
        .iter()
        .map(|p| p.input.as_str())
        .chain(negatives.iter().map(|(_, t)| t.as_str()));
    for text in inputs {
        let once = red.apply(text);
        assert_eq!(red.apply(&once), once, "placeholders matched again: {text}");
    }
}

#[test]
fn never_panics_on_random_card_like_text() {
    // Fixed-seed xorshift over an alphabet heavy in digits, separators,
    // base64 and multi-byte characters, so candidates and checks run often.
    let alphabet: Vec<char> = "0123456789 -  +.:=\"AKIAGBDEXeyJ_/@é电话«"
        .chars()
        .collect();
    let red = r();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..2_000 {
        let mut text = String::new();
        for _ in 0..64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push(alphabet[(state % alphabet.len() as u64) as usize]);
        }
        let once = red.apply(&text);
        assert_eq!(red.apply(&once), once, "{text}");
    }
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
fn spaced_card_is_one_card_not_a_phone() {
    assert_eq!(
        r().apply("card 4111 1111 1111 1111 ok"),
        "card [REDACTED:card] ok"
    );
}

#[test]
fn leaves_ordinary_text_and_numbers_alone() {
    let text = "what is the price of plan 3 in 2024? about 1200 tokens";
    assert_eq!(r().apply(text), text);
}

#[test]
fn redacts_before_truncating() {
    let red = with(RedactOptions {
        max_summary_chars: 12,
        ..RedactOptions::default()
    });
    assert_eq!(red.apply("ann@example.com and more"), "[REDACTED:em…");
}

#[test]
fn extra_patterns_apply_and_bad_ones_are_named() {
    let red = with(RedactOptions {
        extra_patterns: vec![r"\bEMP-\d{4}\b".into()],
        ..RedactOptions::default()
    });
    assert_eq!(red.apply("id EMP-1234"), "id [REDACTED]");
    let err = Redactor::new(&RedactOptions {
        extra_patterns: vec!["(".into()],
        ..RedactOptions::default()
    })
    .unwrap_err();
    assert_eq!(err.code(), "store_bad_pattern");
}

#[test]
fn named_rules_use_their_name_and_may_mask_only_a_group() {
    let red = with(RedactOptions {
        extra_rules: vec![
            RedactRule::new("employee_id", r"\bEMP-[0-9]{6}\b"),
            RedactRule::new("ticket", r"ticket=(?P<secret>[A-Z]{3}-[0-9]+)"),
        ],
        ..RedactOptions::default()
    });
    assert_eq!(
        red.apply("EMP-123456 opened ticket=ABC-42"),
        "[REDACTED:employee_id] opened ticket=[REDACTED:ticket]"
    );
    // Built-ins claim first: a card inside a user's match is still a card.
    let red = with(RedactOptions {
        extra_rules: vec![RedactRule::new("digits", r"[0-9]{4}")],
        ..RedactOptions::default()
    });
    assert_eq!(red.apply("4111111111111111"), "[REDACTED:card]");
    for bad in ["", "has space", "x]y"] {
        let err = Redactor::new(&RedactOptions {
            extra_rules: vec![RedactRule::new(bad, "x")],
            ..RedactOptions::default()
        })
        .unwrap_err();
        assert_eq!(err.code(), "store_bad_redact_rule", "{bad:?}");
    }
}

#[test]
fn detectors_switch_off_by_id_or_label() {
    let text = "call 415-555-0100, ssn 123-45-6789, nino AB123456C";
    let no_phones = with(RedactOptions {
        disabled: vec!["phone".into()],
        ..RedactOptions::default()
    });
    assert_eq!(
        no_phones.apply(text),
        "call 415-555-0100, ssn [REDACTED:national_id], nino [REDACTED:national_id]"
    );
    let no_nino = with(RedactOptions {
        disabled: vec!["uk_nino".into()],
        ..RedactOptions::default()
    });
    assert_eq!(
        no_nino.apply(text),
        "call [REDACTED:phone], ssn [REDACTED:national_id], nino AB123456C"
    );
    let none = with(RedactOptions {
        builtin: false,
        ..RedactOptions::default()
    });
    assert_eq!(none.apply(text), text);
}

#[test]
fn unknown_disabled_names_are_an_error_with_a_hint() {
    let err = Redactor::new(&RedactOptions {
        disabled: vec!["phone".into(), "phonee".into(), "nonsense".into()],
        ..RedactOptions::default()
    })
    .unwrap_err();
    assert_eq!(err.code(), "store_bad_redact_rule");
    let message = err.to_string();
    assert!(
        message.contains("`phonee` (did you mean `phone`?)"),
        "{message}"
    );
    assert!(
        message.contains("`nonsense`,") || message.contains("`nonsense`:"),
        "{message}"
    );
    assert!(!message.contains("`phone`,"), "{message}");
}

#[test]
fn docs_list_every_detector() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/traces.md");
    let docs = std::fs::read_to_string(path).unwrap();
    let section = docs
        .split_once("## Redaction")
        .map(|(_, rest)| rest)
        .expect("docs/traces.md has a `## Redaction` section");
    for d in DETECTORS {
        assert!(
            section.contains(&format!("`{}`", d.id)),
            "docs/traces.md does not list detector `{}`",
            d.id
        );
    }
}

#[test]
fn structured_fields_are_redacted_string_by_string() {
    let red = r();
    let error = serde_json::json!({
        "code": "upstream_error",
        "detail": "HTTP 500 from h: {\"q\":\"card 4111 1111 1111 1111\",\"password\":\"hunter2!\"}",
        "nested": [{"password": "pw-7c7c7c", "user": "ann"}],
        "count": 3
    });
    let out = red.json(&error);
    for secret in ["4111 1111", "hunter2!", "pw-7c7c7c"] {
        assert!(!out.contains(secret), "{secret} in {out}");
    }
    let back: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(back["count"], 3);
    assert_eq!(back["nested"][0]["user"], "ann");
    assert_eq!(back["code"], "upstream_error");
    // Idempotent, and text with nothing to mask comes back as serialised.
    assert_eq!(red.json(&back), out);
    let plain = serde_json::json!({"a": "b", "n": [1, 2]});
    assert_eq!(red.json(&plain), plain.to_string());
}
