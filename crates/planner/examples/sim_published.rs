//! The serving simulator against a published open-loop serving figure.
//!
//! `cargo run --release -p glassbox-planner --example sim_published`
//!
//! Source: ovg-project/kvcached pull request 331,
//! `benchmarks/bench_layout/H100_results.md` (vLLM 0.19.0, one H100 80GB
//! HBM3, `vllm serve Qwen/Qwen3-0.6B --gpu-memory-utilization 0.5
//! --max-model-len 2048`, `vllm bench serve` random dataset 512 in / 128
//! out, 500 prompts, means over three seeds). The "vanilla" rows:
//! rate 16 req/s: TTFT 38.9 ms, TPOT 2.39 ms (means); rate inf (all 500 at
//! once): 94.91 req/s, TTFT 2905 ms, TPOT 5.45 ms (means).
//!
//! The model is described by its public `config.json` shape (28 layers,
//! hidden 1024, 16 heads, 8 KV heads, head_dim 128, FFN 3072, vocabulary
//! 151,936, tied embeddings); the step times come from the shipped
//! efficiency factors, nothing is fitted to these rows.

use std::error::Error;

use glassbox_planner::efficiency::Engine;
use glassbox_planner::sim::{
    self, Arrivals, EstimatorCost, Lengths, Limits, Profile, SlaP99, Traffic,
};
use glassbox_planner::{Estimator, HardwareCatalogue, Quant, Scenario, hf_config, request};

const QWEN3_0_6B: &str = r#"{"hidden_size": 1024, "num_hidden_layers": 28,
  "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
  "intermediate_size": 3072, "vocab_size": 151936, "tie_word_embeddings": true}"#;

fn main() -> Result<(), Box<dyn Error>> {
    let model = hf_config::from_str(QWEN3_0_6B, "qwen3-0.6b", "Qwen3-0.6B config")?;
    let hw = HardwareCatalogue::builtin()?;
    let est = Estimator::new(request::efficiency_table(None)?);
    let scenario = Scenario {
        model: &model,
        hw: hw.get("h100-sxm")?,
        quant: Quant::parse("bf16")?,
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 128,
        context: 2048,
        // --gpu-memory-utilization 0.5
        memory_headroom: 0.5,
    };
    let cost = EstimatorCost::new(&est, scenario);
    // vLLM V1 defaults for the OpenAI server: 8192 batched tokens, 1024 seqs (H100 class).
    let limits = Limits {
        max_running: 1024,
        max_batched_tokens: 8192,
        ..Limits::with_kv_tokens(cost.kv_tokens())
    };
    println!(
        "{:>6}  {:>22}  {:>22}  {:>22}",
        "rate", "mean TTFT ms sim/pub", "mean TPOT ms sim/pub", "req/s sim/pub"
    );
    for (label, rate, ttft, tpot, rps) in [
        ("16", 16.0, 38.9, 2.39, 15.87),
        ("inf", 1e6, 2905.0, 5.45, 94.91),
    ] {
        let traffic = Traffic {
            arrivals: Arrivals::Poisson { rate },
            prompt: Lengths::Fixed(512),
            output: Lengths::Fixed(128),
            profile: Profile::Chat,
            tasks: 500,
            seed: 42,
        };
        let r = sim::simulate(&cost, limits, &traffic, 1, SlaP99::default())?;
        // At rate inf every request is due at once: throughput is requests over the makespan.
        let sim_rps = if rate > 1e5 {
            r.tasks as f64 / (r.e2e_ms.p99.max(r.e2e_ms.mean) / 1e3)
        } else {
            r.throughput_per_s
        };
        println!(
            "{label:>6}  {:>10.1} / {:<9.1}  {:>10.2} / {:<9.2}  {:>10.1} / {:<9.2}",
            r.ttft_ms.mean, ttft, r.tpot_ms.mean, tpot, sim_rps, rps
        );
    }
    Ok(())
}
