//! `glassbox bench llm`: the calibration benchmark of one language model
//! (`--local` llama.cpp or an OpenAI-compatible `--endpoint`), written as a
//! measurements CSV that `glassbox plan calibrate` fits, and with `--rates`
//! or `--loads` the serving simulator's check against the local engine.
//! The flags are resolved into a `glassbox_bench::llm::LlmConfig`, the
//! library measures (method in `glassbox_bench::llm`), and the results are
//! printed here.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use glassbox_bench::llm::{self, LlmConfig, LlmReport, Target, Validation};

use super::errors::bench_error;
use crate::cmd::common::OutputFormat;
use crate::exit::Coded;
use crate::out::Out;
use crate::out::table::{Align, Table};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes a measurements CSV for `glassbox plan calibrate FILE`. \
                  Method: docs/planner.md (Calibration from real runs, Validation of the simulator)."
)]
pub struct LlmArgs {
    /// Benchmark the local engine (llama.cpp, the model in --model-file).
    #[arg(
        long,
        required_unless_present = "endpoint",
        conflicts_with = "endpoint"
    )]
    pub local: bool,
    /// Benchmark an OpenAI-compatible server at this base URL (`/v1/chat/completions`).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Local: the GGUF file [default: the fetched SmolLM2-135M].
    #[arg(long)]
    pub model_file: Option<PathBuf>,
    /// Endpoint: the `model` sent with each request.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// Endpoint: API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "GLASSBOX_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The model's id in the planner catalogue (`glassbox plan list-models`).
    #[arg(long, default_value = "smollm2-135m")]
    pub planner_model: String,
    /// The device's id in the planner catalogue (or in --hardware-file).
    #[arg(long, default_value = "cpu-generic")]
    pub gpu: String,
    /// Weight format, for the planner.
    #[arg(long, default_value = "q4_1")]
    pub quant: String,
    /// Engine, for the planner [default: llama.cpp with --local, else vllm].
    #[arg(long)]
    pub engine: Option<String>,
    /// Repetitions of each run (the median is kept).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Where to write the measurements CSV.
    #[arg(long, short, default_value = "glassbox-bench-llm.csv")]
    pub output: PathBuf,
    /// Local: CPU threads [default: one per physical core].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Local: after the runs, load the engine open loop at these rates
    /// (requests/s, comma-separated) and compare measured with simulated P99.
    #[arg(long, value_delimiter = ',', value_name = "REQ_PER_S")]
    pub rates: Vec<f64>,
    /// Local: like `--rates`, as fractions of the engine's capacity (what
    /// the step profile says it sustains at --max-num-seqs), e.g. `0.3,0.6,0.85`.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "FRACTION",
        conflicts_with = "rates"
    )]
    pub loads: Vec<f64>,
    /// Open loop: requests per rate.
    #[arg(long, default_value_t = 40)]
    pub requests: usize,
    /// Open loop: prompt tokens per request.
    #[arg(long, default_value_t = 256)]
    pub prompt_tokens: u64,
    /// Open loop: the most tokens generated per request.
    #[arg(long, default_value_t = 64)]
    pub gen_tokens: u32,
    /// Open loop: sequences the local engine runs at once.
    #[arg(long, default_value_t = 4)]
    pub max_num_seqs: u32,
    /// Seed of the open-loop arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(a: LlmArgs) -> anyhow::Result<ExitCode> {
    let out = Out::new(a.format);
    let config = resolve(&a)?;
    let report = llm::run(&config).map_err(bench_error)?;
    out.result(&report.to_json(), || table(&report))?;
    Ok(ExitCode::SUCCESS)
}

/// The flags as a validated benchmark (a bad option is exit 78).
pub fn resolve(a: &LlmArgs) -> anyhow::Result<LlmConfig> {
    if a.runs == 0 || a.requests < 10 {
        return Err(Coded::invalid(
            "`--runs` must be at least 1 and `--requests` at least 10",
        ));
    }
    if let Some(r) = a.rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(Coded::invalid(format!(
            "`--rates` must be above 0, got {r}"
        )));
    }
    if let Some(r) = a.loads.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        return Err(Coded::invalid(format!(
            "`--loads` are fractions of capacity above 0 (e.g. 0.5), got {r}"
        )));
    }
    if (!a.rates.is_empty() || !a.loads.is_empty()) && !a.local {
        return Err(Coded::invalid(
            "`--rates`/`--loads` check the simulator against the local engine: use them with `--local`",
        ));
    }
    let target = if a.local {
        Target::Local {
            model_file: a.model_file.clone().unwrap_or_else(default_model),
            threads: a.threads,
        }
    } else {
        Target::Endpoint {
            url: a.endpoint.clone().unwrap_or_default(),
            model: a.model.clone(),
            api_key: a.api_key.clone(),
        }
    };
    Ok(LlmConfig {
        target,
        planner_model: a.planner_model.clone(),
        gpu: a.gpu.clone(),
        quant: a.quant.clone(),
        engine: a
            .engine
            .clone()
            .unwrap_or_else(|| if a.local { "llama.cpp" } else { "vllm" }.into()),
        runs: a.runs,
        output: a.output.clone(),
        rates: a.rates.clone(),
        loads: a.loads.clone(),
        requests: a.requests,
        prompt_tokens: a.prompt_tokens,
        gen_tokens: a.gen_tokens,
        max_num_seqs: a.max_num_seqs,
        seed: a.seed,
        date: crate::cmd::calibrate::today(),
    })
}

fn default_model() -> PathBuf {
    glassbox_models::smollm2_path(&glassbox_models::models_dir())
}

/// The runs, where the measurements went, and the simulator's check.
fn table(r: &LlmReport) -> String {
    let mut out = String::new();
    let t = &r.target;
    let _ = writeln!(
        out,
        "{} ({}) on {}, engine {}",
        t.model, r.version, t.gpu, t.engine
    );
    let rows = r
        .runs
        .iter()
        .map(|r| {
            vec![
                r.name.clone(),
                r.prompt_tokens.to_string(),
                r.gen_tokens.to_string(),
                format!("{:.1}", r.ttft_ms),
                r.prefill_ms.map_or("-".into(), |v| format!("{v:.1}")),
                r.tpot_ms.map_or("-".into(), |v| format!("{v:.2}")),
            ]
        })
        .collect();
    out.push_str(
        &Table::new(&["run", "prompt", "out", "TTFT ms", "prefill ms", "TPOT ms"])
            .align(&[Align::Number; 6])
            .rows(rows)
            .render(),
    );
    let _ = writeln!(
        out,
        "\nmeasurements: {} (fit with `glassbox plan calibrate {} -o factors.toml`)",
        r.output.display(),
        r.output.display()
    );
    if let Some(v) = &r.validation {
        validation_text(v, &mut out);
    }
    out
}

fn validation_text(v: &Validation, out: &mut String) {
    let steps: Vec<String> = v.decode_step_ms.iter().map(|t| format!("{t:.1}")).collect();
    let _ = writeln!(
        out,
        "\nstep profile: prefill {:.2} ms/token; decode step ms at batch 1..{}: {}; capacity {:.3} req/s",
        v.prefill_ms_per_token,
        steps.len(),
        steps.join(" / "),
        v.capacity_rps
    );
    let _ = writeln!(
        out,
        "\nopen loop, measured vs simulated (same arrivals and token counts; first 10% left out):"
    );
    let pair = |measured: f64, simulated: f64| format!("{measured:.0} / {simulated:.0}");
    let err = |e: f64| format!("{:+.0}%", e * 100.0);
    let rows = v
        .checks
        .iter()
        .map(|c| {
            vec![
                format!("{:.3}", c.rate),
                c.load.map_or("-".into(), |l| format!("{:.0}%", l * 100.0)),
                c.requests.to_string(),
                pair(c.measured_ttft_ms.p50, c.simulated_ttft_ms.p50),
                pair(c.measured_ttft_ms.p99, c.simulated_ttft_ms.p99),
                err(c.ttft_p99_error),
                pair(c.measured_e2e_ms.p99, c.simulated_e2e_ms.p99),
                err(c.e2e_p99_error),
            ]
        })
        .collect();
    let header = [
        "rate/s",
        "load",
        "reqs",
        "TTFT p50 meas/sim",
        "TTFT p99 meas/sim",
        "err",
        "E2E p99 meas/sim",
        "err",
    ];
    out.push_str(
        &Table::new(&header)
            .align(&[Align::Right; 8])
            .rows(rows)
            .render(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_bench::llm::RateCheck;
    use glassbox_planner::calibrate::{BenchRun, BenchTarget};
    use glassbox_planner::sim::Percentiles;

    fn ms(p50: f64, p99: f64) -> Percentiles {
        Percentiles {
            count: 10,
            mean: p50,
            p50,
            p95: p99,
            p99,
        }
    }

    #[test]
    fn the_tables_align_runs_and_measured_against_simulated() {
        let run = |name: &str, prefill_ms| BenchRun {
            name: name.into(),
            prompt_tokens: 512,
            gen_tokens: 256,
            ttft_ms: 1234.5,
            prefill_ms,
            tpot_ms: Some(41.25),
        };
        let report = LlmReport {
            target: BenchTarget {
                gpu: "cpu".into(),
                engine: "llama.cpp".into(),
                model: "smollm2".into(),
                quant: "q4".into(),
                kv_dtype: "f16".into(),
                source: "local".into(),
            },
            version: "v1".into(),
            runs: vec![
                run("seed001-200", None),
                run("seed000-512x256", Some(980.0)),
            ],
            output: PathBuf::from("m.csv"),
            validation: Some(Validation {
                prefill_ms_per_token: 1.5,
                decode_step_ms: vec![40.0, 44.0],
                capacity_rps: 0.25,
                checks: vec![RateCheck {
                    rate: 0.125,
                    load: Some(0.5),
                    requests: 40,
                    measured_ttft_ms: ms(900.0, 2000.0),
                    simulated_ttft_ms: ms(950.0, 1800.0),
                    measured_e2e_ms: ms(9000.0, 12000.0),
                    simulated_e2e_ms: ms(9100.0, 13200.0),
                    ttft_p99_error: -0.1,
                    e2e_p99_error: 0.1,
                }],
            }),
        };
        let text = table(&report);
        assert!(text.contains("run              prompt  out  TTFT ms  prefill ms  TPOT ms\n"));
        assert!(text.contains("seed001-200         512  256   1234.5           -    41.25\n"));
        assert!(text.contains("seed000-512x256     512  256   1234.5       980.0    41.25\n"));
        assert!(
            text.contains(
                "rate/s  load  reqs  TTFT p50 meas/sim  TTFT p99 meas/sim   err  E2E p99 meas/sim   err\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                " 0.125   50%    40          900 / 950        2000 / 1800  -10%     12000 / 13200  +10%\n"
            ),
            "{text}"
        );
    }
}
