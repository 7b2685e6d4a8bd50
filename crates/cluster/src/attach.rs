//! Existing OpenAI-compatible servers as members (`glassbox worker
//! --attach URL`): their load read from their Prometheus `/metrics`.
//!
//! Each engine names the same three facts differently, and renames them
//! between versions; [`Engine`] holds the names, [`LoadReader`] turns one
//! scrape into a [`Load`] in vLLM's terms:
//!
//! | engine | running | waiting | KV usage (0–1) | output tokens |
//! |---|---|---|---|---|
//! | vLLM | `vllm:num_requests_running` | `vllm:num_requests_waiting` | `vllm:kv_cache_usage_perc` (older: `vllm:gpu_cache_usage_perc`) | `vllm:generation_tokens_total` |
//! | SGLang | `sglang:num_running_reqs` | `sglang:num_queue_reqs` | `sglang:token_usage` | `sglang:generation_tokens_total` (else `sglang:gen_throughput`) |
//! | llama.cpp `llama-server --metrics` | `llamacpp:requests_processing` | `llamacpp:requests_deferred` | `llamacpp:kv_cache_usage_ratio` | `llamacpp:tokens_predicted_total` |
//! | Glassbox | `glassbox_llm_num_requests_running` | `glassbox_llm_num_requests_waiting` | `glassbox_llm_kv_cache_usage_perc` | `glassbox_llm_generation_tokens` |
//!
//! Series with several label sets (one per model or data-parallel engine)
//! are summed, except KV usage, which is the fullest one's. Output tokens
//! per second come from the counter's rise between two scrapes.
//!
//! [`parse`] reads the Prometheus text exposition format (and OpenMetrics'
//! superset as far as these servers use it: `# EOF`, exemplars). It is a
//! careful parser of its own rather than a dependency: the format is a
//! line per sample, and the crates that parse it bring regex and date
//! libraries for features these servers do not use.

use std::time::Duration;

use crate::member::{Load, now_ms};

/// One sample: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// What went wrong reading a server's metrics.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    #[error("line {line} of the metrics is not a sample: {reason} (`{text}`)")]
    Syntax {
        line: usize,
        reason: &'static str,
        text: String,
    },
    #[error(
        "the metrics name no engine Glassbox knows (no `vllm:`, `sglang:`, `llamacpp:` or `glassbox_llm_` series; for llama-server, start it with `--metrics`)"
    )]
    UnknownEngine,
    #[error(
        "the {engine} metrics lack `{name}` (is this the engine's /metrics? for llama-server, start it with `--metrics`)"
    )]
    Missing { engine: &'static str, name: String },
}

/// The serving engines whose metrics are understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Vllm,
    Sglang,
    LlamaCpp,
    Glassbox,
}

/// An engine's names for the facts in a [`Load`], newest first.
struct Names {
    running: &'static [&'static str],
    waiting: &'static [&'static str],
    kv_usage: &'static [&'static str],
    output_tokens: &'static [&'static str],
    /// A tok/s gauge, used when there is no counter.
    output_rate: &'static [&'static str],
}

impl Engine {
    pub const ALL: [Engine; 4] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::LlamaCpp,
        Engine::Glassbox,
    ];

    /// The name in a [`WorkerRecord`](crate::WorkerRecord)'s `engine`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Glassbox => "glassbox",
        }
    }

    pub fn from_name(name: &str) -> Option<Engine> {
        let n = name.to_ascii_lowercase();
        match n.as_str() {
            "llamacpp" | "llama-server" => Some(Engine::LlamaCpp),
            _ => Engine::ALL.into_iter().find(|e| e.name() == n),
        }
    }

    fn names(self) -> Names {
        match self {
            Engine::Vllm => Names {
                running: &["vllm:num_requests_running"],
                waiting: &["vllm:num_requests_waiting"],
                kv_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
                output_tokens: &["vllm:generation_tokens_total", "vllm:generation_tokens"],
                output_rate: &[],
            },
            Engine::Sglang => Names {
                running: &["sglang:num_running_reqs"],
                waiting: &["sglang:num_queue_reqs"],
                kv_usage: &["sglang:token_usage"],
                output_tokens: &["sglang:generation_tokens_total"],
                output_rate: &["sglang:gen_throughput"],
            },
            Engine::LlamaCpp => Names {
                running: &["llamacpp:requests_processing"],
                waiting: &["llamacpp:requests_deferred"],
                kv_usage: &["llamacpp:kv_cache_usage_ratio"],
                output_tokens: &["llamacpp:tokens_predicted_total"],
                output_rate: &[],
            },
            Engine::Glassbox => Names {
                running: &["glassbox_llm_num_requests_running"],
                waiting: &["glassbox_llm_num_requests_waiting"],
                kv_usage: &["glassbox_llm_kv_cache_usage_perc"],
                output_tokens: &["glassbox_llm_generation_tokens"],
                output_rate: &[],
            },
        }
    }

    /// The engine whose `running` series the samples carry.
    pub fn detect(samples: &[Sample]) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| {
            let names = e.names();
            samples
                .iter()
                .any(|s| names.running.contains(&s.name.as_str()))
        })
    }
}

/// Turns successive scrapes of one server into loads.
#[derive(Debug, Clone)]
pub struct LoadReader {
    engine: Option<Engine>,
    /// The output-token counter and when it was read.
    last_tokens: Option<(f64, Duration)>,
}

impl LoadReader {
    /// `engine`: as told (`--engine`), else detected at the first scrape.
    pub fn new(engine: Option<Engine>) -> LoadReader {
        LoadReader {
            engine,
            last_tokens: None,
        }
    }

    pub fn engine(&self) -> Option<Engine> {
        self.engine
    }

    /// One scrape's load; `at` is a monotonic time (since any fixed start)
    /// for the tok/s between scrapes.
    pub fn read(&mut self, text: &str, at: Duration) -> Result<Load, MetricsError> {
        let samples = parse(text)?;
        let engine = match self.engine {
            Some(e) => e,
            None => {
                let e = Engine::detect(&samples).ok_or(MetricsError::UnknownEngine)?;
                self.engine = Some(e);
                e
            }
        };
        let names = engine.names();
        let running = sum(&samples, names.running).ok_or_else(|| MetricsError::Missing {
            engine: engine.name(),
            name: names.running[0].to_owned(),
        })?;
        let waiting = sum(&samples, names.waiting).unwrap_or(0.0);
        let kv_usage = max(&samples, names.kv_usage).unwrap_or(0.0);
        let tokens_per_second = match sum(&samples, names.output_tokens) {
            Some(total) => {
                let rate = match self.last_tokens {
                    Some((before, then)) if at > then => {
                        // A restarted server's counter starts again from 0.
                        let rise = if total >= before {
                            total - before
                        } else {
                            total
                        };
                        rise / (at - then).as_secs_f64()
                    }
                    _ => 0.0,
                };
                self.last_tokens = Some((total, at));
                rate
            }
            None => sum(&samples, names.output_rate).unwrap_or(0.0),
        };
        let ms = now_ms();
        Ok(Load {
            running: count(running),
            waiting: count(waiting),
            kv_usage: kv_usage.clamp(0.0, 1.0),
            tokens_per_second,
            at: ms / 1000,
            at_ms: Some(ms),
        })
    }
}

fn count(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// The first of `names` present, summed over its label sets.
fn sum(samples: &[Sample], names: &[&str]) -> Option<f64> {
    names.iter().find_map(|name| {
        let mut found = samples.iter().filter(|s| s.name == *name).peekable();
        found.peek()?;
        Some(found.map(|s| s.value).filter(|v| v.is_finite()).sum())
    })
}

/// The first of `names` present, its largest value.
fn max(samples: &[Sample], names: &[&str]) -> Option<f64> {
    names.iter().find_map(|name| {
        samples
            .iter()
            .filter(|s| s.name == *name && s.value.is_finite())
            .map(|s| s.value)
            .reduce(f64::max)
    })
}

/// Parses the text exposition format: every sample, in order. Comments
/// (`# HELP`, `# TYPE`, `# EOF`) and blank lines are skipped; a line that
/// is not a sample is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Sample>, MetricsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(sample(line).map_err(|reason| MetricsError::Syntax {
            line: i + 1,
            reason,
            text: line.chars().take(120).collect(),
        })?);
    }
    Ok(out)
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

fn sample(line: &str) -> Result<Sample, &'static str> {
    let end = line
        .char_indices()
        .find(|&(i, c)| !is_name_char(c, i == 0))
        .map_or(line.len(), |(i, _)| i);
    if end == 0 {
        return Err("it does not start with a metric name");
    }
    let name = line[..end].to_owned();
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = label_set(after, &mut labels)?;
    }
    // The value, then an optional timestamp, then an optional exemplar
    // (`# {trace_id="…"} 1.0`), which is not part of the sample.
    let rest = rest.split(" # ").next().unwrap_or_default();
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or("it has no value")?;
    let value = parse_value(value).ok_or("its value is not a number")?;
    if let Some(ts) = fields.next()
        && ts.parse::<f64>().is_err()
    {
        return Err("its timestamp is not a number");
    }
    if fields.next().is_some() {
        return Err("it has text after the value and timestamp");
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse().ok(),
    }
}

/// Reads `name="value",…}`; returns what follows the `}`.
fn label_set<'a>(
    mut s: &'a str,
    labels: &mut Vec<(String, String)>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let end = s
            .char_indices()
            .find(|&(i, c)| !(is_name_char(c, i == 0) && c != ':'))
            .map_or(s.len(), |(i, _)| i);
        if end == 0 {
            return Err("a label has no name");
        }
        let name = s[..end].to_owned();
        s = s[end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or("a label has no `=`")?
            .trim_start();
        s = s.strip_prefix('"').ok_or("a label value is not quoted")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next() {
                None => return Err("a label value is not closed"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => return Err("a label value has a bad escape"),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((name, value));
        s = s[close + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels are not separated by `,`");
        }
    }
}

#[cfg(test)]
mod tests;
