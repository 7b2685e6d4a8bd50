//! The serving simulator against published serving benchmarks.
//!
//! `cargo run --release -p glassbox-planner --example sim_published`
//!
//! Every step time comes from the shipped efficiency factors and the engine
//! catalogue (per-step host cost `c0 + c1·n`, the server front end's time
//! per request); nothing here is fitted to these rows, with one stated
//! exception: vLLM's per-request server latency
//! (`EngineProfile::request_overhead_ms`) is the kvcached light-load TTFT
//! minus the engine's own part, so that row checks nothing for TTFT; every
//! other figure is a check. Published figures are means over all requests;
//! the simulator's leave out the first 10% (warm-up).
//!
//! Sources:
//!
//! - **kvcached**: ovg-project/kvcached pull request 331,
//!   `benchmarks/bench_layout/H100_results.md` and `sweep_results/` (vLLM
//!   0.19.0, one H100 80GB HBM3, `vllm serve Qwen/Qwen3-0.6B
//!   --gpu-memory-utilization 0.5 --max-model-len 2048`, `vllm bench serve`
//!   random 512 in / 128 out, 500 prompts, means over three seeds): the
//!   "vanilla" rows at 16 req/s and with all 500 sent at once.
//! - **GPUStack**: gpustack/gpustack `docs/performance-lab/qwen3-8b/h100-latency.md`
//!   (one H100 SXM; `vllm serve Qwen/Qwen3-8B` on vLLM 0.11.0, SGLang
//!   0.5.3.post3, `trtllm-serve` 1.2.0rc1, all at their defaults; `vllm
//!   bench serve` ShareGPT, 100 prompts, `--max-concurrency 4`: 23,260
//!   prompt and 22,061 generated tokens; ShareGPT's lengths vary, simulated
//!   as uniform from 4 to twice those means, 233 and 221) and
//!   `docs/performance-lab/qwen3-14b/h100.md` (vLLM 0.11.0 defaults, random
//!   datasets sent all at once: 2000 in / 100 out and 4000 / 200, 500
//!   prompts; 128 / 4, 1000 prompts).
//!
//! Models are described by their public `config.json` shapes. Engine limits
//! are the engines' defaults on an 80 GB device (vLLM V1's OpenAI server:
//! 8192 batched tokens, 1024 sequences; SGLang and TensorRT-LLM: 8192-token
//! chunks).

use std::error::Error;

use glassbox_planner::efficiency::Engine;
use glassbox_planner::sim::{
    self, Arrivals, EstimatorCost, Lengths, Limits, Profile, SlaP99, Traffic,
};
use glassbox_planner::{Estimator, HardwareCatalogue, Quant, Scenario, hf_config, request};

const QWEN3_0_6B: &str = r#"{"hidden_size": 1024, "num_hidden_layers": 28,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 3072, "vocab_size": 151936, "tie_word_embeddings": true}"#;
const QWEN3_8B: &str = r#"{"hidden_size": 4096, "num_hidden_layers": 36,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 12288, "vocab_size": 151936, "tie_word_embeddings": false}"#;
const QWEN3_14B: &str = r#"{"hidden_size": 5120, "num_hidden_layers": 40,
  "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 17408, "vocab_size": 151936, "tie_word_embeddings": false}"#;

/// How the benchmark sent its requests.
#[derive(Clone, Copy)]
enum Load {
    Poisson(f64),
    AllAtOnce,
    Concurrency(u32),
}

/// One published run and its means.
struct Run {
    source: &'static str,
    label: &'static str,
    model: (&'static str, &'static str),
    engine: Engine,
    /// Fraction of memory left free (`1 − gpu_memory_utilization`); `None`:
    /// the engine's default.
    headroom: Option<f64>,
    load: Load,
    /// Mean prompt and output tokens; `spread`: drawn uniformly from 4 to
    /// twice the mean minus 4 (a dataset of varied lengths), else fixed.
    prompt: u64,
    output: u64,
    spread: bool,
    prompts: usize,
    ttft_ms: f64,
    tpot_ms: f64,
    req_s: f64,
    /// This row's TTFT set vLLM's server latency: not a check.
    ttft_calibrates: bool,
}

const RUNS: &[Run] = &[
    Run {
        source: "kvcached",
        label: "Qwen3-0.6B vLLM 16 req/s (TTFT: the calibration row)",
        model: ("qwen3-0.6b", QWEN3_0_6B),
        engine: Engine::Vllm,
        headroom: Some(0.5),
        load: Load::Poisson(16.0),
        prompt: 512,
        output: 128,
        spread: false,
        prompts: 500,
        ttft_ms: 38.9,
        tpot_ms: 2.39,
        req_s: 15.87,
        ttft_calibrates: true,
    },
    Run {
        source: "kvcached",
        label: "Qwen3-0.6B vLLM all 500 at once",
        model: ("qwen3-0.6b", QWEN3_0_6B),
        engine: Engine::Vllm,
        headroom: Some(0.5),
        load: Load::AllAtOnce,
        prompt: 512,
        output: 128,
        spread: false,
        prompts: 500,
        ttft_ms: 2905.0,
        tpot_ms: 5.45,
        req_s: 94.91,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-8B vLLM concurrency 4",
        model: ("qwen3-8b", QWEN3_8B),
        engine: Engine::Vllm,
        headroom: None,
        load: Load::Concurrency(4),
        prompt: 233,
        output: 221,
        spread: true,
        prompts: 100,
        ttft_ms: 64.00,
        tpot_ms: 7.38,
        req_s: 2.25,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-8B SGLang concurrency 4",
        model: ("qwen3-8b", QWEN3_8B),
        engine: Engine::Sglang,
        headroom: None,
        load: Load::Concurrency(4),
        prompt: 233,
        output: 221,
        spread: true,
        prompts: 100,
        ttft_ms: 27.70,
        tpot_ms: 7.19,
        req_s: 2.38,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-8B TensorRT-LLM concurrency 4",
        model: ("qwen3-8b", QWEN3_8B),
        engine: Engine::TrtLlm,
        headroom: None,
        load: Load::Concurrency(4),
        prompt: 233,
        output: 221,
        spread: true,
        prompts: 100,
        ttft_ms: 51.61,
        tpot_ms: 7.67,
        req_s: 2.21,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-14B vLLM 2000/100 all at once",
        model: ("qwen3-14b", QWEN3_14B),
        engine: Engine::Vllm,
        headroom: None,
        load: Load::AllAtOnce,
        prompt: 2000,
        output: 100,
        spread: false,
        prompts: 500,
        ttft_ms: 50716.0,
        tpot_ms: 206.51,
        req_s: 5.06,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-14B vLLM 4000/200 all at once",
        model: ("qwen3-14b", QWEN3_14B),
        engine: Engine::Vllm,
        headroom: None,
        load: Load::AllAtOnce,
        prompt: 4000,
        output: 200,
        spread: false,
        prompts: 500,
        ttft_ms: 112717.0,
        tpot_ms: 132.45,
        req_s: 2.20,
        ttft_calibrates: false,
    },
    Run {
        source: "GPUStack",
        label: "Qwen3-14B vLLM 128/4 all at once",
        model: ("qwen3-14b", QWEN3_14B),
        engine: Engine::Vllm,
        headroom: None,
        load: Load::AllAtOnce,
        prompt: 128,
        output: 4,
        spread: false,
        prompts: 1000,
        ttft_ms: 18283.0,
        tpot_ms: 525.31,
        req_s: 44.02,
        ttft_calibrates: false,
    },
];

fn lengths(mean: u64, spread: bool) -> Lengths {
    if spread {
        Lengths::Uniform {
            lo: 4,
            hi: 2 * mean - 4,
        }
    } else {
        Lengths::Fixed(mean)
    }
}

/// Signed percentage error of `sim` against `published`.
fn err(sim: f64, published: f64) -> String {
    format!("{:+.0}%", (sim / published - 1.0) * 100.0)
}

fn main() -> Result<(), Box<dyn Error>> {
    let hw = HardwareCatalogue::builtin()?;
    let h100 = hw.get("h100-sxm")?;
    let est = Estimator::new(request::efficiency_table(None)?);
    println!(
        "{:<9} {:<52} {:>24} {:>24} {:>24}",
        "source", "run", "mean TTFT ms sim/pub", "mean TPOT ms sim/pub", "req/s sim/pub"
    );
    let mut abs_errors = Vec::new();
    for run in RUNS {
        let model = hf_config::from_str(run.model.1, run.model.0, "public config.json")?;
        let profile = run.engine.profile(h100.memory_gb);
        let scenario = Scenario {
            model: &model,
            hw: h100,
            quant: Quant::parse("bf16")?,
            kv_bytes: 2.0,
            engine: run.engine,
            tp: 1,
            batch: 1,
            prompt_tokens: run.prompt,
            gen_tokens: run.output,
            context: run.prompt + run.output,
            memory_headroom: run.headroom.unwrap_or(profile.memory_reserve),
        };
        let cost = EstimatorCost::new(&est, scenario);
        let limits = Limits {
            max_running: profile.max_running.unwrap_or(u32::MAX),
            max_batched_tokens: 8192,
            ..Limits::with_kv_tokens(cost.kv_tokens())
        };
        let arrivals = match run.load {
            Load::Poisson(rate) => Arrivals::Poisson { rate },
            Load::AllAtOnce => Arrivals::Closed {
                users: run.prompts as u32,
            },
            Load::Concurrency(users) => Arrivals::Closed { users },
        };
        let traffic = Traffic {
            arrivals,
            prompt: lengths(run.prompt, run.spread),
            output: lengths(run.output, run.spread),
            profile: Profile::Chat,
            tasks: run.prompts,
            seed: 42,
        };
        let r = sim::simulate(&cost, limits, &traffic, 1, SlaP99::default())?;
        // A closed loop's throughput is the benchmark's: requests over its duration.
        let req_s = match run.load {
            Load::Poisson(_) => r.throughput_per_s,
            _ => run.prompts as f64 / r.makespan_s,
        };
        let checks = [
            (r.ttft_ms.mean, run.ttft_ms, !run.ttft_calibrates),
            (r.tpot_ms.mean, run.tpot_ms, true),
            (req_s, run.req_s, true),
        ];
        for (s, p, check) in checks {
            if check {
                abs_errors.push((s / p - 1.0).abs());
            }
        }
        println!(
            "{:<9} {:<52} {:>9.1} / {:<8.1} {:>5} {:>8.2} / {:<7.2} {:>5} {:>8.2} / {:<7.2} {:>5}",
            run.source,
            run.label,
            r.ttft_ms.mean,
            run.ttft_ms,
            err(r.ttft_ms.mean, run.ttft_ms),
            r.tpot_ms.mean,
            run.tpot_ms,
            err(r.tpot_ms.mean, run.tpot_ms),
            req_s,
            run.req_s,
            err(req_s, run.req_s),
        );
    }
    abs_errors.sort_by(f64::total_cmp);
    println!(
        "median absolute error over the {} checked figures: {:.0}%",
        abs_errors.len(),
        abs_errors[abs_errors.len() / 2] * 100.0
    );
    Ok(())
}
