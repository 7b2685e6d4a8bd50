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
//!   with an exponential tail from 4 to 1024 around those means, 233 and
//!   221) and
//!   `docs/performance-lab/qwen3-14b/h100.md` (vLLM 0.11.0 defaults, random
//!   datasets sent all at once: 2000 in / 100 out and 4000 / 200, 500
//!   prompts; 128 / 4, 1000 prompts).
//! - **wmx**: ai.wmx.dev `benchmarks` (the `serving/raw-vllm` baseline,
//!   commit 8e78aaa): vLLM 0.23.0 on one NVIDIA L4 (g2-standard-4),
//!   `Qwen/Qwen2.5-0.5B-Instruct` BF16, `--gpu-memory-utilization 0.6
//!   --max-model-len 8192`, `vllm bench serve` 256 in / 128 out with
//!   `--ignore-eos`, closed loop at concurrency 1 to 32; medians (TTFT p50,
//!   ITL p50) and output tok/s (req/s here = tok/s ÷ 128). The number of
//!   prompts is not stated; simulated as 20 per user, at least 200. Added
//!   as a check on another GPU, model size and vLLM release; nothing fitted
//!   to it.
//!
//! Models are described by their public `config.json` shapes. Engine limits
//! are the engines' defaults on the device ([`Engine::profile`]: vLLM V1's
//! OpenAI server runs 8192 batched tokens and 1024 sequences on 70 GiB or
//! more except the A100, else 2048 and 256; SGLang and TensorRT-LLM:
//! 8192-token chunks on these cards).

mod runs;

use std::error::Error;

use glassbox_planner::efficiency::Engine;
use glassbox_planner::sim::{
    self, Arrivals, EstimatorCost, Lengths, Limits, Profile, SlaP99, Traffic,
};
use glassbox_planner::{Estimator, HardwareCatalogue, Quant, Scenario, hf_config, request};
use runs::{Load, QWEN3_14B, QWEN3_32B, RUNS, Run, Stat};

/// ShareGPT's lengths (`spread`): 4 plus an exponential tail, capped at
/// 1024 as `vllm bench serve`'s ShareGPT sampler keeps prompts of at most
/// 1024 tokens and pairs of at most 2048, with the published mean (prior in
/// docs/planner.md). Random datasets: fixed.
fn lengths(mean: u64, spread: bool) -> Result<Lengths, Box<dyn Error>> {
    Ok(if spread {
        Lengths::exponential(4, 1024, mean as f64, "ShareGPT length")?
    } else {
        Lengths::Fixed(mean)
    })
}

/// Signed percentage error of `sim` against `published`.
fn err(sim: f64, published: f64) -> String {
    format!("{:+.0}%", (sim / published - 1.0) * 100.0)
}

/// The blind check: GPUStack's other single-GPU rows, taken by the rule in
/// docs/planner.md ("Blind check on GPUStack's single-GPU pages") before
/// their figures were read. Columns: page, label, model, gpu, engine, quant,
/// max_batched_tokens (empty: the engine's default), prompt, output, spread
/// (1: ShareGPT, uniform lengths), prompts, mean TTFT ms, mean TPOT ms, req/s.
const BLIND: &str = include_str!("gpustack_blind.csv");

fn blind_runs() -> Result<Vec<Run>, Box<dyn Error>> {
    let mut runs = Vec::new();
    for (n, line) in BLIND.lines().enumerate().skip(1) {
        let f: Vec<&'static str> = line.split(',').collect();
        let [
            _page,
            label,
            model,
            gpu,
            engine,
            quant,
            mbt,
            prompt,
            output,
            spread,
            prompts,
            ttft,
            tpot,
            req_s,
        ] = f[..]
        else {
            return Err(format!(
                "gpustack_blind.csv:{}: expected 14 fields, found {}",
                n + 1,
                f.len()
            )
            .into());
        };
        let model = match model {
            "qwen3-14b" => ("qwen3-14b", QWEN3_14B),
            "qwen3-32b" => ("qwen3-32b", QWEN3_32B),
            other => {
                return Err(
                    format!("gpustack_blind.csv:{}: unknown model `{other}`", n + 1).into(),
                );
            }
        };
        runs.push(Run {
            source: "GPUStack",
            label,
            model,
            gpu,
            engine: Engine::parse(engine)?,
            stat: Stat::Mean,
            headroom: None,
            load: Load::AllAtOnce,
            prompt: prompt.parse()?,
            output: output.parse()?,
            spread: spread == "1",
            prompts: prompts.parse()?,
            ttft_ms: ttft.parse()?,
            tpot_ms: tpot.parse()?,
            req_s: req_s.parse()?,
            ttft_calibrates: false,
            quant,
            max_batched_tokens: if mbt.is_empty() {
                None
            } else {
                Some(mbt.parse()?)
            },
        });
    }
    Ok(runs)
}

/// Simulated (TTFT, TPOT, req/s) for one run, in the run's statistic.
fn simulate(
    run: &Run,
    est: &Estimator,
    hw: &HardwareCatalogue,
) -> Result<(f64, f64, f64), Box<dyn Error>> {
    let model = hf_config::from_str(run.model.1, run.model.0, "public config.json")?;
    let gpu = hw.get(run.gpu)?;
    let profile = run.engine.profile(gpu);
    let scenario = Scenario {
        model: &model,
        hw: gpu,
        quant: Quant::parse(run.quant)?,
        kv_bytes: 2.0,
        engine: run.engine,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: run.prompt,
        gen_tokens: run.output,
        context: run.prompt + run.output,
        memory_headroom: run.headroom.unwrap_or(profile.memory_reserve),
        ubatch: None,
    };
    let cost = EstimatorCost::new(est, scenario);
    let limits = Limits {
        max_running: profile.max_running.unwrap_or(u32::MAX),
        max_batched_tokens: run.max_batched_tokens.unwrap_or(profile.max_batched_tokens),
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
        prompt: lengths(run.prompt, run.spread)?,
        output: lengths(run.output, run.spread)?,
        profile: Profile::Chat,
        tasks: run.prompts,
        seed: 42,
    };
    let r = sim::simulate(&cost, limits, &traffic, 1, SlaP99::default())?;
    if r.rejected > 0 {
        return Err(format!(
            "{} of {} requests do not fit one replica's KV cache ({} tokens)",
            r.rejected,
            run.prompts,
            cost.kv_tokens()
        )
        .into());
    }
    // A closed loop's throughput is the benchmark's: requests over its duration.
    let req_s = match run.load {
        Load::Poisson(_) => r.throughput_per_s,
        _ => run.prompts as f64 / r.makespan_s,
    };
    Ok(match run.stat {
        Stat::Mean => (r.ttft_ms.mean, r.tpot_ms.mean, req_s),
        Stat::Median => (r.ttft_ms.p50, r.tpot_ms.p50, req_s),
    })
}

fn median_pct(mut errors: Vec<f64>) -> f64 {
    errors.sort_by(f64::total_cmp);
    errors.get(errors.len() / 2).map_or(f64::NAN, |e| e * 100.0)
}

/// Prints one table and returns the absolute errors of its checked figures
/// as (TTFT, TPOT, req/s) lists.
fn table(runs: &[Run], est: &Estimator, hw: &HardwareCatalogue) -> [Vec<f64>; 3] {
    println!(
        "{:<9} {:<60} {:>24} {:>24} {:>24}",
        "source", "run", "TTFT ms sim/pub", "TPOT ms sim/pub", "req/s sim/pub"
    );
    let mut errors: [Vec<f64>; 3] = Default::default();
    for run in runs {
        let (ttft, tpot, req_s) = match simulate(run, est, hw) {
            Ok(figures) => figures,
            Err(e) => {
                // A run the simulator cannot serve (it does not fit) is a
                // miss on every figure, not a row to drop.
                println!("{:<9} {:<60} not simulated: {e}", run.source, run.label);
                for list in &mut errors {
                    list.push(1.0);
                }
                continue;
            }
        };
        let checks = [
            (ttft, run.ttft_ms, !run.ttft_calibrates),
            (tpot, run.tpot_ms, true),
            (req_s, run.req_s, true),
        ];
        for (list, (s, p, check)) in errors.iter_mut().zip(checks) {
            if check {
                list.push((s / p - 1.0).abs());
            }
        }
        println!(
            "{:<9} {:<60} {:>9.1} / {:<8.1} {:>5} {:>8.2} / {:<7.2} {:>5} {:>8.2} / {:<7.2} {:>5}",
            run.source,
            run.label,
            ttft,
            run.ttft_ms,
            err(ttft, run.ttft_ms),
            tpot,
            run.tpot_ms,
            err(tpot, run.tpot_ms),
            req_s,
            run.req_s,
            err(req_s, run.req_s),
        );
    }
    errors
}

fn main() -> Result<(), Box<dyn Error>> {
    let hw = HardwareCatalogue::builtin()?;
    let est = Estimator::new(request::efficiency_table(None)?);
    let errors = table(RUNS, &est, &hw);
    let all: Vec<f64> = errors.concat();
    println!(
        "median absolute error over the {} checked figures: {:.0}%",
        all.len(),
        median_pct(all)
    );

    println!();
    println!("Blind check: GPUStack's other single-GPU rows (rule: docs/planner.md)");
    let blind = blind_runs()?;
    let errors = table(&blind, &est, &hw);
    for (name, list) in ["TTFT", "TPOT", "req/s"].iter().zip(&errors) {
        println!(
            "  {name:<6} median absolute error {:.0}% over {} runs",
            median_pct(list.clone()),
            list.len()
        );
    }
    for engine in [Engine::Vllm, Engine::Sglang, Engine::TrtLlm] {
        let picked: Vec<f64> = blind
            .iter()
            .enumerate()
            .filter(|(_, r)| r.engine == engine)
            .flat_map(|(i, _)| errors.iter().map(move |list| list[i]))
            .collect();
        println!(
            "  {:<8} median absolute error {:.0}% over {} figures",
            engine.as_str(),
            median_pct(picked.clone()),
            picked.len()
        );
    }
    let all: Vec<f64> = errors.concat();
    println!(
        "  overall  median absolute error {:.0}% over {} figures",
        median_pct(all.clone()),
        all.len()
    );
    Ok(())
}
