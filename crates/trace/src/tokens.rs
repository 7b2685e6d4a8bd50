//! Token usage as providers bill it: each token counted once, in the class
//! its price belongs to.
//!
//! Providers report usage in different shapes, and the shapes overlap in
//! different ways: OpenAI's `prompt_tokens` *include* the cached and audio
//! prompt tokens and its `completion_tokens` include the reasoning and audio
//! ones; Anthropic's `input_tokens` *exclude* the cache reads and writes;
//! Gemini's `promptTokenCount` includes `cachedContentTokenCount` while
//! `candidatesTokenCount` excludes `thoughtsTokenCount`. Summing the raw
//! numbers double-counts one way and under-counts the other, which is how
//! bills with cached and reasoning tokens go wrong. [`TokenUsage`] holds
//! disjoint classes, so a bill is one line per class and the classes add up
//! to what was used.
//!
//! A payload whose details exceed its totals (more cached tokens than
//! prompt tokens) is an error naming both fields, never a wrapped-around
//! number.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Tokens of one model call, split into disjoint price classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Text (or image) prompt tokens read at the full input rate.
    #[serde(default)]
    pub input: u64,
    /// Prompt tokens served from the provider's prompt cache.
    #[serde(default)]
    pub cached_input: u64,
    /// Prompt tokens written into the prompt cache (Anthropic).
    #[serde(default)]
    pub cache_creation: u64,
    /// Visible generated tokens.
    #[serde(default)]
    pub output: u64,
    /// Generated reasoning ("thinking") tokens not shown in the answer.
    #[serde(default)]
    pub reasoning: u64,
    /// Audio prompt tokens.
    #[serde(default)]
    pub audio_input: u64,
    /// Audio generated tokens.
    #[serde(default)]
    pub audio_output: u64,
}

/// Which provider's usage shape a payload is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageFormat {
    OpenAi,
    Anthropic,
    Gemini,
}

impl UsageFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageFormat::OpenAi => "openai",
            UsageFormat::Anthropic => "anthropic",
            UsageFormat::Gemini => "gemini",
        }
    }
}

/// A usage payload that does not add up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsageError {
    #[error("usage field `{field}` is {value}, not a whole number of tokens")]
    NotCount { field: String, value: String },
    #[error(
        "usage field `{part}` ({part_value}) exceeds `{whole}` ({whole_value}), which should include it"
    )]
    PartExceedsWhole {
        part: String,
        part_value: u64,
        whole: String,
        whole_value: u64,
    },
    #[error(
        "not a known usage shape (hint: expected OpenAI `prompt_tokens`, Anthropic `input_tokens` or Gemini `promptTokenCount`)"
    )]
    Unknown,
}

fn count(v: &Value, path: &[&str]) -> Result<u64, UsageError> {
    let mut cur = v;
    for key in path {
        match cur.get(key) {
            Some(next) if !next.is_null() => cur = next,
            _ => return Ok(0),
        }
    }
    cur.as_u64().ok_or_else(|| UsageError::NotCount {
        field: path.join("."),
        value: cur.to_string(),
    })
}

/// `whole - parts`, or an error naming the first part that overflows it.
fn rest(whole: (&str, u64), parts: &[(&str, u64)]) -> Result<u64, UsageError> {
    let mut left = whole.1;
    for (name, n) in parts {
        left = left
            .checked_sub(*n)
            .ok_or_else(|| UsageError::PartExceedsWhole {
                part: (*name).to_string(),
                part_value: *n,
                whole: whole.0.to_string(),
                whole_value: whole.1,
            })?;
    }
    Ok(left)
}

impl TokenUsage {
    /// OpenAI Chat Completions / Responses usage (`prompt_tokens` or
    /// `input_tokens`, with `*_tokens_details`).
    pub fn from_openai(u: &Value) -> Result<TokenUsage, UsageError> {
        // The Responses API names them input/output, Chat Completions prompt/completion.
        let (p, c, pd, cd) = if u.get("prompt_tokens").is_some() {
            (
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
                "completion_tokens_details",
            )
        } else {
            (
                "input_tokens",
                "output_tokens",
                "input_tokens_details",
                "output_tokens_details",
            )
        };
        let prompt = count(u, &[p])?;
        let completion = count(u, &[c])?;
        let cached = count(u, &[pd, "cached_tokens"])?;
        let audio_in = count(u, &[pd, "audio_tokens"])?;
        let reasoning = count(u, &[cd, "reasoning_tokens"])?;
        let audio_out = count(u, &[cd, "audio_tokens"])?;
        let cached_name = format!("{pd}.cached_tokens");
        let audio_in_name = format!("{pd}.audio_tokens");
        let reasoning_name = format!("{cd}.reasoning_tokens");
        let audio_out_name = format!("{cd}.audio_tokens");
        Ok(TokenUsage {
            input: rest(
                (p, prompt),
                &[(&cached_name, cached), (&audio_in_name, audio_in)],
            )?,
            cached_input: cached,
            cache_creation: 0,
            output: rest(
                (c, completion),
                &[(&reasoning_name, reasoning), (&audio_out_name, audio_out)],
            )?,
            reasoning,
            audio_input: audio_in,
            audio_output: audio_out,
        })
    }

    /// Anthropic Messages usage: `input_tokens` already excludes the cache
    /// reads and writes, which are billed at their own rates.
    pub fn from_anthropic(u: &Value) -> Result<TokenUsage, UsageError> {
        Ok(TokenUsage {
            input: count(u, &["input_tokens"])?,
            cached_input: count(u, &["cache_read_input_tokens"])?,
            cache_creation: count(u, &["cache_creation_input_tokens"])?,
            output: count(u, &["output_tokens"])?,
            ..TokenUsage::default()
        })
    }

    /// Gemini `usageMetadata`: the prompt count includes the cached tokens;
    /// thinking tokens are counted apart from the candidates; audio prompt
    /// tokens are the `AUDIO` entry of `promptTokensDetails`, tool-use
    /// prompt tokens are billed as input.
    pub fn from_gemini(u: &Value) -> Result<TokenUsage, UsageError> {
        let prompt = count(u, &["promptTokenCount"])?;
        let cached = count(u, &["cachedContentTokenCount"])?;
        let tool = count(u, &["toolUsePromptTokenCount"])?;
        let modality = |list: &str, m: &str| -> Result<u64, UsageError> {
            let Some(items) = u.get(list).and_then(Value::as_array) else {
                return Ok(0);
            };
            let mut n = 0u64;
            for item in items {
                if item.get("modality").and_then(Value::as_str) == Some(m) {
                    n = n.saturating_add(count(item, &["tokenCount"])?);
                }
            }
            Ok(n)
        };
        let audio_in = modality("promptTokensDetails", "AUDIO")?;
        let audio_cached = modality("cacheTokensDetails", "AUDIO")?;
        let audio_out = modality("candidatesTokensDetails", "AUDIO")?;
        let candidates = count(u, &["candidatesTokenCount"])?;
        let audio_in_fresh = rest(
            ("promptTokensDetails[AUDIO]", audio_in),
            &[("cacheTokensDetails[AUDIO]", audio_cached)],
        )?;
        Ok(TokenUsage {
            input: rest(
                ("promptTokenCount", prompt),
                &[
                    ("cachedContentTokenCount", cached),
                    ("promptTokensDetails[AUDIO] (uncached)", audio_in_fresh),
                ],
            )?
            .saturating_add(tool),
            cached_input: cached,
            cache_creation: 0,
            output: rest(
                ("candidatesTokenCount", candidates),
                &[("candidatesTokensDetails[AUDIO]", audio_out)],
            )?,
            reasoning: count(u, &["thoughtsTokenCount"])?,
            audio_input: audio_in_fresh,
            audio_output: audio_out,
        })
    }

    /// The format of a usage object, from its field names.
    pub fn detect(u: &Value) -> Option<UsageFormat> {
        if u.get("promptTokenCount").is_some() || u.get("candidatesTokenCount").is_some() {
            Some(UsageFormat::Gemini)
        } else if u.get("prompt_tokens").is_some()
            || u.get("input_tokens_details").is_some()
            || u.get("output_tokens_details").is_some()
        {
            Some(UsageFormat::OpenAi)
        } else if u.get("input_tokens").is_some()
            || u.get("cache_read_input_tokens").is_some()
            || u.get("cache_creation_input_tokens").is_some()
        {
            Some(UsageFormat::Anthropic)
        } else {
            None
        }
    }

    /// Parses `u` in the given format.
    pub fn parse(format: UsageFormat, u: &Value) -> Result<TokenUsage, UsageError> {
        match format {
            UsageFormat::OpenAi => TokenUsage::from_openai(u),
            UsageFormat::Anthropic => TokenUsage::from_anthropic(u),
            UsageFormat::Gemini => TokenUsage::from_gemini(u),
        }
    }

    /// Parses a usage object in whatever known format it is, or a whole
    /// response holding one (`usage` / `usageMetadata`).
    pub fn from_any(v: &Value) -> Result<(UsageFormat, TokenUsage), UsageError> {
        let u = v
            .get("usage")
            .or_else(|| v.get("usageMetadata"))
            .unwrap_or(v);
        let format = TokenUsage::detect(u).ok_or(UsageError::Unknown)?;
        Ok((format, TokenUsage::parse(format, u)?))
    }

    /// Every token read: input, cached, cache writes, audio input.
    pub fn prompt_total(&self) -> u64 {
        self.input
            .saturating_add(self.cached_input)
            .saturating_add(self.cache_creation)
            .saturating_add(self.audio_input)
    }

    /// Every token generated: output, reasoning, audio output.
    pub fn completion_total(&self) -> u64 {
        self.output
            .saturating_add(self.reasoning)
            .saturating_add(self.audio_output)
    }

    /// The sum of two calls' usage.
    pub fn plus(&self, o: &TokenUsage) -> TokenUsage {
        TokenUsage {
            input: self.input.saturating_add(o.input),
            cached_input: self.cached_input.saturating_add(o.cached_input),
            cache_creation: self.cache_creation.saturating_add(o.cache_creation),
            output: self.output.saturating_add(o.output),
            reasoning: self.reasoning.saturating_add(o.reasoning),
            audio_input: self.audio_input.saturating_add(o.audio_input),
            audio_output: self.audio_output.saturating_add(o.audio_output),
        }
    }

    /// True when only plain input and output tokens were used.
    pub fn is_plain(&self) -> bool {
        self.cached_input == 0
            && self.cache_creation == 0
            && self.reasoning == 0
            && self.audio_input == 0
            && self.audio_output == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_details_come_out_of_the_totals() {
        let u = json!({
            "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 192, "audio_tokens": 8}
        });
        let t = TokenUsage::from_openai(&u).unwrap();
        assert_eq!(t.input, 80);
        assert_eq!(t.cached_input, 1920);
        assert_eq!(t.audio_input, 6);
        assert_eq!(t.output, 100);
        assert_eq!(t.reasoning, 192);
        assert_eq!(t.audio_output, 8);
        assert_eq!(t.prompt_total(), 2006);
        assert_eq!(t.completion_total(), 300);
    }

    #[test]
    fn a_part_larger_than_its_whole_is_named() {
        let u = json!({"prompt_tokens": 10, "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 11}});
        let err = TokenUsage::from_openai(&u).unwrap_err();
        assert_eq!(
            err.to_string(),
            "usage field `prompt_tokens_details.cached_tokens` (11) exceeds `prompt_tokens` (10), which should include it"
        );
        let bad = json!({"input_tokens": -3});
        assert!(matches!(
            TokenUsage::from_anthropic(&bad),
            Err(UsageError::NotCount { .. })
        ));
    }

    #[test]
    fn formats_are_told_apart_by_their_fields() {
        let a = json!({"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 100});
        assert_eq!(TokenUsage::detect(&a), Some(UsageFormat::Anthropic));
        let g = json!({"usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}});
        assert_eq!(TokenUsage::from_any(&g).unwrap().0, UsageFormat::Gemini);
        let r = json!({"input_tokens": 5, "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 1}});
        let (f, t) = TokenUsage::from_any(&r).unwrap();
        assert_eq!((f, t.output, t.reasoning), (UsageFormat::OpenAi, 1, 1));
        assert_eq!(
            TokenUsage::from_any(&json!({"x": 1})),
            Err(UsageError::Unknown)
        );
    }
}
