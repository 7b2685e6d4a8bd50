//! The seeds' worked examples, reproduced.

use glassbox_planner::estimate::decode_terms;
use glassbox_planner::workload::{self, Pricing, Workload};
use glassbox_planner::{
    EfficiencyTable, Engine, Estimator, HardwareCatalogue, ModelCatalogue, Quant, Scenario,
};

#[test]
fn seed_003_7b_fp16_decode_ceiling_is_about_70_tok_s_at_1_tb_s() {
    let models = ModelCatalogue::builtin().unwrap();
    let mut hw = HardwareCatalogue::builtin()
        .unwrap()
        .get("a100-sxm-80gb")
        .unwrap()
        .clone();
    hw.bandwidth_gbps = 1000.0;
    let s = Scenario {
        model: models.get("llama-2-7b").unwrap(),
        hw: &hw,
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 1,
        gen_tokens: 1,
        context: 4096,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let e = est.estimate(&s).unwrap();
    // 6.74e9 params × 2 B = 13.5 GB ≈ the seed's 14 GB.
    assert!((e.weights_gb - 13.5).abs() < 0.1, "{}", e.weights_gb);
    let ceiling = 1.0 / decode_terms(&s, 1.0, 1.0).memory_s;
    assert!(
        (65.0..80.0).contains(&ceiling),
        "roofline ceiling {ceiling}"
    );
    // With efficiency and per-step overhead the prediction sits below the ceiling.
    assert!(
        e.decode_tok_s < ceiling && e.decode_tok_s > 40.0,
        "{}",
        e.decode_tok_s
    );
}

#[test]
fn seed_001_fifty_thousand_requests_a_day_needs_one_or_two_cards() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = HardwareCatalogue::builtin().unwrap();
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let w = Workload {
        requests_per_day: 50_000.0,
        input_tokens: 1500,
        output_tokens: 300,
        pricing: Pricing::default(),
        ..Workload::default()
    };
    for gpu in ["a100-sxm-80gb", "h100-sxm"] {
        let s = Scenario {
            model: models.get("mistral-7b").unwrap(),
            hw: hw.get(gpu).unwrap(),
            quant: Quant::parse("fp16").unwrap(),
            kv_bytes: 2.0,
            engine: Engine::Vllm,
            tp: 1,
            pp: 1,
            batch: 1,
            prompt_tokens: 1500,
            gen_tokens: 300,
            context: 1800,
            memory_headroom: 0.2,
            ubatch: None,
        };
        let z = workload::size(&est, &s, &w).unwrap();
        // 50,000 × (1500 + 300) = 90M tokens/day.
        assert_eq!(z.tokens_per_day, 90e6);
        // 2 × params × requests × output tokens: 2 × 7.24e9 × 5e4 × 300 ≈ the
        // seed's 2 × 7e9 × 5e4 × 300 = 2.1e17.
        let flops = 2.0 * s.model.active_params_b() * 1e9 * 50_000.0 * 300.0;
        assert!(
            (z.seed001_flops_per_day / flops - 1.0).abs() < 1e-12,
            "{} vs {flops}",
            z.seed001_flops_per_day
        );
        assert!(
            (z.seed001_flops_per_day / 2.1e17 - 1.0).abs() < 0.05,
            "{}",
            z.seed001_flops_per_day
        );
        // The seed's cards run at 40% of peak for a day.
        let peak = s.hw.peak_tflops(s.quant.compute) * 1e12;
        let by_flops = z.seed001_flops_per_day / (peak * 0.4 * 86_400.0);
        assert!(
            (z.seed001_gpus_by_flops / by_flops - 1.0).abs() < 1e-12,
            "{}",
            z.seed001_gpus_by_flops
        );
        assert!(
            (1..=2).contains(&z.gpus_needed),
            "{gpu}: {} gpus",
            z.gpus_needed
        );
        assert!(z.cost_per_1m_tokens > 0.0 && z.utilisation > 0.0 && z.utilisation <= 1.0);
        // Cost per 1M tokens is the day's cost over the day's tokens.
        assert!(
            (z.cost_per_1m_tokens - z.cost_per_day_usd / (z.tokens_per_day / 1e6)).abs()
                < 1e-9 * z.cost_per_1m_tokens.max(1.0),
            "{gpu}: {} vs {} / {}",
            z.cost_per_1m_tokens,
            z.cost_per_day_usd,
            z.tokens_per_day
        );
    }
}

#[test]
fn seed_000_concurrency_formula_matches_its_example() {
    // 300 TOPS card at 40%, 7B, 512 tokens, 3 s: 7e9 × 512 × 2 / 3 = 2.389e12 per request.
    let models = ModelCatalogue::builtin().unwrap();
    let mut hw = HardwareCatalogue::builtin()
        .unwrap()
        .get("rtx-4090")
        .unwrap()
        .clone();
    hw.int8_tops = Some(300.0);
    let mut spec = models.get("llama-2-7b").unwrap().clone();
    spec.measured_params = Some(7e9);
    let s = Scenario {
        model: &spec,
        hw: &hw,
        quant: Quant::parse("q4_0").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::LlamaCpp,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 512,
        context: 1024,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let w = Workload {
        output_tokens: 512,
        input_tokens: 512,
        sla: workload::Sla {
            e2e_ms: Some(3000.0),
            ..Default::default()
        },
        ..Workload::default()
    };
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let z = workload::size(&est, &s, &w).unwrap();
    assert!(
        (z.seed000_concurrency_per_gpu - 120e12 / 2.389e12).abs() < 0.1,
        "{}",
        z.seed000_concurrency_per_gpu
    );
}

#[test]
fn mixed_pool_uses_fewer_gpus_than_separate_pools() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = HardwareCatalogue::builtin().unwrap();
    let s = Scenario {
        model: models.get("llama-3.1-8b").unwrap(),
        hw: hw.get("h100-sxm").unwrap(),
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 1000,
        gen_tokens: 200,
        context: 1200,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let w = Workload {
        requests_per_day: 2e6,
        input_tokens: 1000,
        output_tokens: 200,
        offline_tokens_per_day: 5e9,
        simultaneous_use: 0.6,
        ..Workload::default()
    };
    let z = workload::size(
        &Estimator::new(EfficiencyTable::defaults().unwrap()),
        &s,
        &w,
    )
    .unwrap();
    let m = z.mixed_pool.unwrap();
    assert!(m.mixed_gpus <= m.separate_gpus, "{m:?}");
    assert!(m.mixed_utilisation >= m.separate_utilisation);
}
