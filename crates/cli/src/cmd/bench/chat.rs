//! `glassbox bench chat`: streamed chat completions against any
//! OpenAI-compatible server (`glassbox serve`, a cluster coordinator, a
//! `glassbox worker`, vLLM, llama-server), open loop (`--rate`, seeded
//! Poisson arrivals) or closed loop (`--concurrency`), with time to first
//! token, end-to-end latency and goodput within `--slo-ms`. The flags are
//! resolved into a `glassbox_bench::chat::ChatConfig`, the library runs it
//! (method in `glassbox_bench::chat`), and the report is printed here.

use std::process::ExitCode;
use std::time::Duration;

use glassbox_bench::chat::{self, ChatConfig, ChatReport, read_questions};

use super::duration::parse_duration;
use super::errors::{bench_error, usage};
use crate::cmd::common::OutputFormat;
use crate::exit::{self, Coded};
use crate::out::Out;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Method: docs/BENCHMARKS.md (\"Cluster placement\"). Exit codes: 0 ok, \
                  2 usage, 69 the server cannot be reached or answered nothing."
)]
pub struct ChatArgs {
    /// Base URL of the server (without `/v1`).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The `model` sent (for `glassbox serve`: a topology id).
    #[arg(long)]
    pub model: String,
    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long, value_name = "REQ_PER_S", conflicts_with = "concurrency")]
    pub rate: Option<f64>,
    /// Closed loop: this many clients back to back [default: 1].
    #[arg(long, short = 'c')]
    pub concurrency: Option<usize>,
    /// Requests to measure.
    #[arg(long, short = 'n', default_value_t = 32)]
    pub requests: usize,
    /// Seed of the Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A question to ask (repeatable; used in turn) [default: a built-in few].
    #[arg(long, short = 'q')]
    pub question: Vec<String>,
    /// A file of questions, one per line; instead of `--question`.
    #[arg(long, value_name = "FILE", conflicts_with = "question")]
    pub questions: Option<String>,
    /// `max_tokens` sent with each request (a `glassbox serve` topology
    /// decides its own).
    #[arg(long, default_value_t = 16)]
    pub max_tokens: u64,
    /// End-to-end latency objectives in milliseconds, for goodput
    /// (comma-separated or repeated: each gets its own).
    #[arg(long, value_name = "MS", value_delimiter = ',')]
    pub slo_ms: Vec<f64>,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub timeout: Duration,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(a: ChatArgs) -> anyhow::Result<ExitCode> {
    let out = Out::new(a.format);
    let config = resolve(&a)?;
    let report = chat::run(&config);
    if report.reached_nothing() {
        return Err(anyhow::Error::new(Coded {
            code: exit::UNAVAILABLE,
            message: format!(
                "no request reached `{}` ({:?}); is the server running?",
                config.url, report.errors
            ),
        }));
    }
    out.result(&report, || table(&report))?;
    Ok(ExitCode::SUCCESS)
}

/// The flags as a validated benchmark: a bad option is a usage error
/// (exit 2), an unreadable or empty questions file exit 78.
pub fn resolve(a: &ChatArgs) -> anyhow::Result<ChatConfig> {
    if let Some(rate) = a.rate
        && !(rate.is_finite() && rate > 0.0)
    {
        return Err(usage(format!("`--rate` must be above 0, got {rate}")));
    }
    for (flag, zero) in [
        ("--requests", a.requests == 0),
        ("--concurrency", a.concurrency == Some(0)),
    ] {
        if zero {
            return Err(usage(format!("`{flag}` is 0: it must be at least 1")));
        }
    }
    if a.slo_ms.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(usage("`--slo-ms` must be above 0".into()));
    }
    let questions = match &a.questions {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Coded::invalid(format!("cannot read `{path}`: {e}")))?;
            read_questions(&text).map_err(bench_error)?
        }
        None => a.question.clone(),
    };
    Ok(ChatConfig {
        url: a.url.clone(),
        model: a.model.clone(),
        api_key: a.api_key.clone(),
        rate: a.rate,
        concurrency: a.concurrency.unwrap_or(1),
        requests: a.requests,
        seed: a.seed,
        questions,
        max_tokens: a.max_tokens,
        slo_ms: a.slo_ms.clone(),
        timeout: a.timeout,
    })
}

fn table(r: &ChatReport) -> String {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let load = match (r.rate, r.concurrency) {
        (Some(rate), _) => format!("open loop, {rate:.2} req/s (seed {})", r.seed),
        (None, c) => format!("closed loop, {} clients", c.unwrap_or(1)),
    };
    let mut s = format!(
        "{} model `{}`: {load}\n{} requests, {} completed, errors {:?}, {:.2} req/s over {:.1} s\n",
        r.url, r.model, r.requests, r.completed, r.errors, r.throughput_rps, r.window_s
    );
    for g in &r.goodput {
        s.push_str(&format!(
            "goodput {:.2} req/s within E2E <= {:.0} ms ({:.0} % of requests)\n",
            g.rps,
            g.slo_ms,
            g.attainment * 100.0
        ));
    }
    s.push_str(&format!(
        "TTFT ms P50 {} P99 {}; E2E ms P50 {} P99 {} max {}\n",
        ms(r.ttft_ms.p50),
        ms(r.ttft_ms.p99),
        ms(r.e2e_ms.p50),
        ms(r.e2e_ms.p99),
        ms(r.e2e_ms.max)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> ChatArgs {
        crate::cmd::common::parse_flags(&["chat", "--model", "chat"], extra)
    }

    #[test]
    fn bad_options_are_usage_errors() {
        for bad in [
            &["--rate", "0"][..],
            &["--requests", "0"],
            &["--slo-ms=-1"],
            &["--concurrency", "0"],
        ] {
            let err = run(args(bad)).unwrap_err();
            assert_eq!(exit::code_for(&err), exit::USAGE, "{bad:?}: {err}");
        }
    }

    #[test]
    fn the_table_shows_goodput_and_percentiles() {
        let mut report = ChatReport {
            url: "http://x".into(),
            model: "chat".into(),
            mode: "open",
            rate: Some(2.0),
            concurrency: None,
            seed: 1,
            requests: 4,
            completed: 3,
            errors: Default::default(),
            window_s: 2.0,
            throughput_rps: 1.5,
            goodput: vec![chat::Goodput {
                slo_ms: 500.0,
                rps: 1.0,
                attainment: 0.5,
            }],
            ttft_ms: Default::default(),
            e2e_ms: Default::default(),
        };
        report.e2e_ms.p50 = Some(400.0);
        let text = table(&report);
        assert!(
            text.contains("goodput 1.00 req/s within E2E <= 500 ms (50 % of requests)"),
            "{text}"
        );
        assert!(text.contains("open loop, 2.00 req/s (seed 1)"), "{text}");
        assert!(text.contains("E2E ms P50 400 P99 -"), "{text}");
    }
}
