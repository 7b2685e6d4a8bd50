//! A Glassbox custom step: masks sensitive words in one text field of the
//! request, says how many it masked, and routes on it (`flagged` when any
//! word matched, `clean` otherwise).
//!
//! Settings (checked against [`CONFIG_SCHEMA`] by `glassbox validate`):
//! `words` (the list to mask, matched case-insensitively), `field` (the
//! input field holding the text, default `question`), `mask` (the
//! replacement, default `***`). A test-only `misbehave` setting makes the
//! step fail on purpose, so the host's limits and error codes can be
//! exercised with a real component: `trap`, `spin` (never returns),
//! `grow` (allocates without bound), `bad_json`, `bad_output` (output that
//! breaks the declared schema), `bad_label` (a label it does not declare),
//! `fail` (returns an error), and `probe`
//! (reports the environment, clock and files it can see).

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Deserialize;
use serde_json::{Value, json};

wit_bindgen::generate!({
    world: "step",
    path: "../../crates/nodes/wit",
});

use glassbox::step::host;
use glassbox::step::types::Fact;

const CONFIG_SCHEMA: &str = r#"{
  "type": "object",
  "required": ["words"],
  "properties": {
    "words": { "type": "array", "items": { "type": "string", "minLength": 1 }, "minItems": 1 },
    "field": { "type": "string", "minLength": 1 },
    "mask": { "type": "string" },
    "misbehave": { "enum": ["trap", "spin", "grow", "bad_json", "bad_output", "fail", "probe", "bad_label"] }
  },
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "required": ["text", "masked"],
  "properties": {
    "text": { "type": "string" },
    "masked": { "type": "integer", "minimum": 0 }
  },
  "additionalProperties": false
}"#;

#[derive(Deserialize)]
struct Settings {
    words: Vec<String>,
    #[serde(default = "default_field")]
    field: String,
    #[serde(default = "default_mask")]
    mask: String,
    #[serde(default)]
    misbehave: Option<String>,
}

fn default_field() -> String {
    "question".into()
}

fn default_mask() -> String {
    "***".into()
}

struct Cleaner;

impl Guest for Cleaner {
    fn describe() -> About {
        About {
            name: "text-cleaner".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            config_schema: Some(CONFIG_SCHEMA.into()),
            output_schema: Some(OUTPUT_SCHEMA.into()),
            labels: vec!["clean".into(), "flagged".into()],
        }
    }

    fn run(settings: String, input: String) -> Result<Reply, String> {
        let settings: Settings =
            serde_json::from_str(&settings).map_err(|e| format!("settings: {e}"))?;
        if let Some(how) = &settings.misbehave {
            return misbehave(how);
        }
        let input: Value = serde_json::from_str(&input).map_err(|e| format!("input: {e}"))?;
        let text = input["input"][settings.field.as_str()]
            .as_str()
            .ok_or_else(|| format!("the input has no text field `{}`", settings.field))?;
        let matcher = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(&settings.words)
            .map_err(|e| format!("words: {e}"))?;
        let masked = matcher.find_iter(text).count();
        let masks = vec![settings.mask.as_str(); settings.words.len()];
        let cleaned = matcher.replace_all(text, &masks);
        // A caller that streams gets the cleaned text as soon as it exists.
        host::emit(&cleaned);
        let (label, fact) = if masked == 0 {
            (
                "clean",
                Fact {
                    en: "the text cleaner found no sensitive words".into(),
                    zh: Some("文本清洗未发现敏感词".into()),
                },
            )
        } else {
            (
                "flagged",
                Fact {
                    en: format!("the text cleaner masked {masked} sensitive word(s)"),
                    zh: Some(format!("文本清洗屏蔽了 {masked} 个敏感词")),
                },
            )
        };
        Ok(Reply {
            output: json!({ "text": cleaned, "masked": masked }).to_string(),
            label: Some(label.into()),
            facts: vec![fact],
        })
    }
}

/// Fails on purpose, the way a buggy step would (see the module docs).
fn misbehave(how: &str) -> Result<Reply, String> {
    let reply = |output: &str| Reply {
        output: output.into(),
        label: None,
        facts: Vec::new(),
    };
    match how {
        "trap" => core::arch::wasm32::unreachable(),
        "spin" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "grow" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "bad_json" => Ok(reply("{\"text\": ")),
        "bad_output" => Ok(reply("{\"text\": 42}")),
        "bad_label" => {
            let mut out = reply("{\"text\": \"\", \"masked\": 0}");
            out.label = Some("maybe".into());
            Ok(out)
        }
        "probe" => {
            // What the sandbox lets the step see, for the host's tests.
            let seen = json!({
                "env": std::env::vars().map(|(k, _)| k).collect::<Vec<_>>(),
                "clock": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                "data": std::fs::read_to_string("/data/hello.txt").ok(),
                "root": std::fs::read_dir("/").is_ok(),
            });
            let mut out = reply(&json!({ "text": seen.to_string(), "masked": 0 }).to_string());
            out.label = Some("clean".into());
            Ok(out)
        }
        _ => Err("asked to fail".into()),
    }
}

export!(Cleaner);
