//! Unit tests of the estimator (a sibling file to keep `estimate.rs` short).

use super::*;
use crate::efficiency::{EfficiencyTable, Engine};
use crate::engine::KV_CONCAT_PASSES;
use crate::hardware::HardwareCatalogue;
use crate::model::ModelCatalogue;

/// A card from the built-in catalogue, owned so a test may change it.
fn card(id: &str) -> crate::hardware::Hardware {
    HardwareCatalogue::builtin()
        .unwrap()
        .get(id)
        .unwrap()
        .clone()
}

/// The plan's explanation line for `metric`.
fn explained(est: &Estimator, s: &Scenario, metric: &str) -> crate::explain::Line {
    let e = est.estimate(s).unwrap();
    e.explain.into_iter().find(|l| l.metric == metric).unwrap()
}

/// One replica on one GPU: `batch` requests of `prompt` + `output` tokens.
fn one_gpu<'a>(
    model: &'a crate::model::ModelSpec,
    hw: &'a crate::hardware::Hardware,
    engine: Engine,
    quant: &str,
    (batch, prompt, output): (u32, u64, u64),
) -> Scenario<'a> {
    Scenario {
        quant: Quant::parse(quant).unwrap(),
        tp: 1,
        batch,
        prompt_tokens: prompt,
        gen_tokens: output,
        context: prompt + output,
        ..fp8_tp8_stream(model, hw, engine)
    }
}

/// `yes` mentions `needle` and `no` does not.
fn assert_only_first_says(yes: &str, no: &str, needle: &str) {
    assert!(yes.contains(needle), "{yes}");
    assert!(!no.contains(needle), "{no}");
}

/// One FP8 stream at tp 8 (128 + 128 tokens), the setup the kernel-boundary
/// tests count boundaries on.
fn fp8_tp8_stream<'a>(
    model: &'a crate::model::ModelSpec,
    hw: &'a crate::hardware::Hardware,
    engine: Engine,
) -> Scenario<'a> {
    Scenario {
        model,
        hw,
        quant: Quant::parse("fp8").unwrap(),
        kv_bytes: 2.0,
        engine,
        tp: 8,
        pp: 1,
        batch: 1,
        prompt_tokens: 128,
        gen_tokens: 128,
        context: 256,
        memory_headroom: 0.1,
        ubatch: None,
    }
}

#[test]
fn seed_003_fp16_7b_ceiling_is_about_70_tok_s_at_1_tb_s() {
    let models = ModelCatalogue::builtin().unwrap();
    let mut hw = card("rtx-3090");
    hw.bandwidth_gbps = 1000.0;
    let s = Scenario {
        model: models.get("llama-2-7b").unwrap(),
        hw: &hw,
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::LlamaCppNoFa,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 1,
        gen_tokens: 1,
        context: 2048,
        memory_headroom: 0.2,
        ubatch: None,
    };
    // Roofline at 100% efficiency and no overhead: 13.5 GB / 1 TB/s.
    let t = decode_terms(&s, 1.0, 1.0);
    let ceiling = 1.0 / t.memory_s;
    assert!((70.0..80.0).contains(&ceiling), "{ceiling}");
    // A step reads the weights (2 B each), one token's KV and (llama.cpp
    // before b6327 writes them) its attention scores, at 1 TB/s.
    let bytes = s.model.decode_read_params(1.0) * 2.0
        + s.kv_bytes_per_token()
        + s.attention_scores_bytes(1.0, 1.0);
    assert_eq!(s.attention_scores_bytes(1.0, 1.0), 32.0 * 32.0 * 16.0);
    assert!((t.bytes - bytes).abs() < 1.0, "{} vs {bytes}", t.bytes);
    assert!((t.memory_s - bytes / 1e12).abs() < 1e-12, "{}", t.memory_s);
    // The seed's round number: 7e9 params × 2 B = 14 GB → 71 tok/s.
    let mut seed = s.model.clone();
    seed.measured_params = Some(7e9);
    let round = Scenario {
        model: &seed,
        ..s.clone()
    };
    let ceiling = 1.0 / decode_terms(&round, 1.0, 1.0).memory_s;
    assert!((65.0..75.0).contains(&ceiling), "{ceiling}");
}

#[test]
fn llama_cpp_before_b6327_writes_its_attention_scores_and_flash_attention_engines_do_not() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("rtx-4090");
    let s = |engine| Scenario {
        model: models.get("llama-3.1-8b").unwrap(),
        hw: &hw,
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 8192,
        gen_tokens: 1,
        context: 8193,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let (cpp, vllm) = (s(Engine::LlamaCppNoFa), s(Engine::Vllm));
    // A current build (flash attention `auto`) keeps them on chip, as vLLM does.
    assert_eq!(
        prefill_terms(&s(Engine::LlamaCpp), 8192.0, 1.0).kv_memory_s,
        0.0
    );
    // An 8192-token prompt: 8192 × 4096.5 causal scores per head and layer
    // (32 × 32), 16 bytes each, in the attention kernels' memory term.
    let scores = 8192.0 * 4096.5 * 32.0 * 32.0 * 16.0;
    let t = prefill_terms(&cpp, 8192.0, 1.0);
    assert!((t.kv_memory_s - scores / 1008e9).abs() < 1e-12, "{t:?}");
    assert_eq!(prefill_terms(&vllm, 8192.0, 1.0).kv_memory_s, 0.0);
    // So llama.cpp's prefill speed falls with the prompt's length well
    // beyond what the attention FLOPs alone cost.
    let est = Estimator::new(EfficiencyTable::priors_only());
    let per_token = |sc: &Scenario, n: f64| est.prefill_pass_s(sc, n) / n;
    let slowdown = |sc: &Scenario| per_token(sc, 8192.0) / per_token(sc, 512.0);
    assert!(
        slowdown(&cpp) > slowdown(&vllm) + 0.2,
        "{} vs {}",
        slowdown(&cpp),
        slowdown(&vllm)
    );
    // Decoding one token at 4096 positions writes 4096 scores per head
    // and layer: an eighth of what reading that context's KV cache costs.
    let d = decode_terms(&cpp, 1.0, 4096.0);
    let kv = 4096.0 * cpp.kv_bytes_per_token();
    let extra = d.kv_memory_s * 1008e9 - kv;
    assert!((extra / kv - 0.125).abs() < 1e-9, "{extra} vs {kv}");
}

#[test]
fn tensor_parallel_adds_comm_and_splits_bytes() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h100-sxm");
    let mut s = Scenario {
        model: models.get("llama-3.1-70b").unwrap(),
        hw: &hw,
        quant: Quant::parse("fp16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 128,
        context: 4096,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let one = decode_terms(&s, 1.0, 512.0);
    s.tp = 4;
    let four = decode_terms(&s, 1.0, 512.0);
    assert!((one.memory_s / four.memory_s - 4.0).abs() < 1e-9);
    // One GPU has no all-reduce; vLLM's kernel boundaries are there either way.
    assert!(four.comm_s > one.comm_s && one.comm_s == s.kernel_bubbles_s());
    let e = Estimator::new(EfficiencyTable::priors_only())
        .estimate(&s)
        .unwrap();
    assert!(e.fits && e.max_concurrent_seqs > 0);
}

#[test]
fn a_batched_steps_matmuls_compute_whole_64_row_tiles() {
    assert_eq!(tile_padded_tokens(1.0), 1.0, "one stream: a GEMV, no tile");
    for (m, rows) in [(2.0, 64.0), (64.0, 64.0), (65.0, 128.0), (168.0, 192.0)] {
        assert_eq!(tile_padded_tokens(m), rows, "{m}");
    }
    let models = ModelCatalogue::builtin().unwrap();
    let hw = HardwareCatalogue::builtin().unwrap();
    let s = Scenario {
        model: models.get("llama-3.1-70b").unwrap(),
        hw: hw.get("h200").unwrap(),
        quant: Quant::parse("fp8").unwrap(),
        kv_bytes: 1.0,
        engine: Engine::TrtLlm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 128,
        gen_tokens: 2048,
        context: 2176,
        memory_headroom: 0.0,
        ubatch: None,
    };
    let per_token = s.forward_compute(1.0, 1000.0);
    let matmul_s = |n: f64| {
        let t = decode_terms(&s, n, 1000.0);
        // Attention's FLOPs are per sequence, not padded.
        assert!((t.attn_compute_s - n * per_token.attn_s).abs() < 1e-15);
        t.compute_s - t.attn_compute_s
    };
    assert!((matmul_s(1.0) - per_token.linear_s).abs() < 1e-15);
    // 65 sequences cost the matmul FLOPs of 128, the same as 128 do; the
    // bytes read are those of 65 sequences.
    assert!((matmul_s(65.0) - 128.0 * per_token.linear_s).abs() < 1e-12);
    assert!((matmul_s(65.0) - matmul_s(128.0)).abs() < 1e-12);
    assert!(decode_terms(&s, 65.0, 1000.0).memory_s < decode_terms(&s, 128.0, 1000.0).memory_s);
    // CPUs and Apple silicon do not pad: four sequences cost four rows, and
    // batching four is never slower per token than one.
    for id in ["apple-m2-max", "cpu-generic"] {
        let s = Scenario {
            hw: hw.get(id).unwrap(),
            engine: Engine::LlamaCpp,
            quant: Quant::parse("q4_k_m").unwrap(),
            ..s
        };
        let c = s.forward_compute(1.0, 1000.0);
        let t = decode_terms(&s, 4.0, 1000.0);
        assert!(
            (t.compute_s - t.attn_compute_s - 4.0 * c.linear_s).abs() < 1e-15,
            "{id}"
        );
        let est = Estimator::new(EfficiencyTable::defaults().unwrap());
        assert!(
            est.tpot_s(&s, 4.0, 1000.0) < 4.0 * est.tpot_s(&s, 1.0, 1000.0),
            "{id}"
        );
    }
}

#[test]
fn an_80_gb_card_holds_80_gib_for_weights_and_kv() {
    // NVIDIA's "80GB" H100 is 80 GiB of HBM (nvidia-smi: 81,559 MiB). Read
    // as 80e9 bytes, 5.9 GB of KV cache vanished: most of what a 32B BF16
    // model leaves free on the card.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h100-sxm");
    let s = Scenario {
        model: models.get("qwen2.5-32b").unwrap(),
        hw: &hw,
        quant: Quant::parse("bf16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 1,
        gen_tokens: 1,
        context: 32_768,
        memory_headroom: 0.1,
        ubatch: None,
    };
    let est = Estimator::new(crate::request::efficiency_table(None).unwrap());
    let cap = est.kv_capacity_bytes(&s);
    let expected = 80.0 * 1024.0 * 1024.0 * 1024.0 * 0.9 - s.weight_bytes();
    assert!((cap - expected).abs() < 1.0, "{cap} vs {expected}");
    assert!(cap > 80e9 * 0.9 - s.weight_bytes() + 5e9, "{cap}");
}

#[test]
fn llama_cpp_overlaps_a_long_prompts_micro_batches_over_layer_split_gpus() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("rtx-4090");
    let one = Scenario {
        model: models.get("llama-3.1-8b").unwrap(),
        hw: &hw,
        quant: Quant::parse("q4_k_m").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::LlamaCpp,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 4096,
        gen_tokens: 0,
        context: 4096,
        memory_headroom: 0.0,
        ubatch: None,
    };
    let four = Scenario {
        pp: 4,
        ..one.clone()
    };
    // One micro-batch (512 tokens): the stages run in turn.
    assert_eq!(crate::parallel::prompt_overlap(&four, 512.0), 1.0);
    // Two logical batches of 2048, four micro-batches each, four stages:
    // 7 stage-times instead of 16.
    assert!((crate::parallel::prompt_overlap(&four, 4096.0) - 7.0 / 16.0).abs() < 1e-12);
    // 1024 tokens on two stages: 3 stage-times instead of 4.
    let two = Scenario {
        pp: 2,
        ..one.clone()
    };
    assert!((crate::parallel::prompt_overlap(&two, 1024.0) - 0.75).abs() < 1e-12);
    assert_eq!(crate::parallel::prompt_overlap(&one, 4096.0), 1.0);
    let est = Estimator::new(EfficiencyTable::priors_only());
    assert!(est.prefill_pass_s(&four, 4096.0) < 0.5 * est.prefill_pass_s(&one, 4096.0));
    // An engine that runs a prompt as one pass gets no overlap.
    let vllm = Scenario {
        engine: Engine::Vllm,
        ..four.clone()
    };
    assert_eq!(crate::parallel::prompt_overlap(&vllm, 4096.0), 1.0);
}

#[test]
fn ranks_that_copy_kv_hold_fewer_sequences_and_read_more_per_step() {
    // DeepSeek-V3's MLA latent is read by every head, so each of 8 tensor-
    // parallel ranks holds all of it: an 8-way replica fits an eighth of the
    // sequences one copy would, and each device reads its whole KV a step.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h200");
    let s = Scenario {
        model: models.get("deepseek-v3").unwrap(),
        hw: &hw,
        quant: Quant::parse("fp8").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 8,
        pp: 1,
        batch: 64,
        prompt_tokens: 3200,
        gen_tokens: 800,
        context: 4000,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let per_token = s.model.kv_bytes_per_token(2.0);
    assert_eq!(s.kv_bytes_per_token(), 8.0 * per_token);
    let est = Estimator::new(crate::request::efficiency_table(None).unwrap());
    let cap = est.kv_capacity_bytes(&s);
    let seqs = est.max_concurrent(&s);
    assert_eq!(seqs, (cap / (8.0 * per_token * 4000.0)).floor() as u64);
    let step = decode_terms(&s, 64.0, 3600.0);
    assert!(
        (step.kv_memory_s * s.bandwidth() - 64.0 * 3600.0 * per_token).abs() < 1.0,
        "{step:?}"
    );
    // A model with a KV head per rank keeps one copy.
    let llama = Scenario {
        model: models.get("llama-3.1-70b").unwrap(),
        ..s
    };
    assert_eq!(
        llama.kv_bytes_per_token(),
        llama.model.kv_bytes_per_token(2.0)
    );
}

#[test]
fn kernel_boundaries_cost_every_layer_whatever_the_split() {
    // vLLM and SGLang run about 6 kernels a layer, each boundary ~5 µs
    // (Hazy Research's count and megakernel comparison): tensor parallelism
    // divides the bytes of a step but not its boundaries.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h100-sxm");
    let s = fp8_tp8_stream(models.get("llama-3.1-70b").unwrap(), &hw, Engine::Vllm);
    let bubbles = 80.0 * 6.0 * crate::engine::KERNEL_BUBBLE_S;
    assert!((s.kernel_bubbles_s() - bubbles).abs() < 1e-12);
    let one = Scenario {
        tp: 1,
        quant: s.quant.clone(),
        ..s
    };
    assert_eq!(one.kernel_bubbles_s(), bubbles);
    let t = decode_terms(&s, 1.0, 200.0);
    assert!(
        (t.comm_s - (s.allreduce_s(1.0) + bubbles)).abs() < 1e-12,
        "{t:?}"
    );
    // TensorRT-LLM's gaps stay in its fitted overhead; Apple has no count.
    let trt = Scenario {
        engine: Engine::TrtLlm,
        quant: s.quant.clone(),
        ..s
    };
    assert_eq!(trt.kernel_bubbles_s(), 0.0);
    let mac = card("apple-m2-ultra");
    let apple = Scenario { hw: &mac, ..s };
    assert_eq!(apple.kernel_bubbles_s(), 0.0);
}

#[test]
fn windowed_layers_hold_and_read_only_their_window() {
    // Gemma 3 27B at 128k tokens: 52 of 62 layers attend over the last
    // 1024. vLLM stores only that window; the pre-0.6 profile stores every
    // token. Both read only the window, since the model masks the rest.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h200");
    let s = Scenario {
        model: models.get("gemma-3-27b").unwrap(),
        hw: &hw,
        quant: Quant::parse("bf16").unwrap(),
        kv_bytes: 2.0,
        engine: Engine::Vllm,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 120_000,
        gen_tokens: 1000,
        context: 131_072,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let held = (10.0 * 131_072.0 + 52.0 * 1024.0) / 62.0;
    assert!((s.kv_tokens_held(131_072.0) - held).abs() < 1e-6);
    let old = Scenario {
        engine: Engine::VllmV0,
        quant: s.quant.clone(),
        ..s
    };
    assert_eq!(old.kv_tokens_held(131_072.0), 131_072.0);
    let est = Estimator::new(crate::request::efficiency_table(None).unwrap());
    let (windowed, full) = (est.max_concurrent(&s), est.max_concurrent(&old));
    assert!(full >= 1, "{full}");
    let ratio = windowed as f64 / full as f64;
    assert!((5.0..7.0).contains(&ratio), "{windowed} vs {full}");
    // The KV a decode step reads is the window for both engines.
    let kv = |sc: &Scenario| decode_terms(sc, 1.0, 131_072.0).kv_memory_s;
    assert_eq!(kv(&s), kv(&old));
    let per_token = s.model.kv_bytes_per_token(2.0);
    assert!((kv(&s) * s.bandwidth() - held * per_token).abs() < 1.0);
    // A short context is not affected.
    assert_eq!(s.kv_tokens_held(800.0), 800.0);
    // The explanation says what the engine keeps.
    let e = est.estimate(&s).unwrap();
    let line = e
        .explain
        .iter()
        .find(|l| l.metric == "max_concurrent_seqs")
        .unwrap();
    assert!(line.formula.contains("window"), "{}", line.formula);
}

#[test]
fn layers_with_experts_pay_the_fused_moe_kernels() {
    // vLLM's fused_experts adds topk_softmax, moe_align_block_size and
    // moe_sum to the MLP's GEMM-activation-GEMM: three boundaries more per
    // layer with experts, none for the dense layers DeepSeek keeps first.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h200");
    let bubble = crate::engine::KERNEL_BUBBLE_S;
    let scenario = |id: &str, engine: Engine| fp8_tp8_stream(models.get(id).unwrap(), &hw, engine);
    let mixtral = scenario("mixtral-8x7b", Engine::Vllm);
    assert!((mixtral.kernel_bubbles_s() - (32.0 * 6.0 + 32.0 * 3.0) * bubble).abs() < 1e-12);
    let ds = scenario("deepseek-v3", Engine::Sglang);
    assert_eq!(ds.model.moe_layers(), 58);
    assert!((ds.kernel_bubbles_s() - (61.0 * 6.0 + 58.0 * 3.0) * bubble).abs() < 1e-12);
    let dense = scenario("llama-3.1-70b", Engine::Vllm);
    assert_eq!(dense.model.moe_layers(), 0);
    assert!((dense.kernel_bubbles_s() - 80.0 * 6.0 * bubble).abs() < 1e-12);
    // Engines without a boundary count keep their gaps in fitted overheads.
    assert_eq!(
        scenario("mixtral-8x7b", Engine::TrtLlm).kernel_bubbles_s(),
        0.0
    );
}

#[test]
fn the_step_formulas_name_block_fp8_floors_where_they_apply() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h200");
    let est = Estimator::new(crate::request::efficiency_table(None).unwrap());
    let names = |id: &str| {
        let s = fp8_tp8_stream(models.get(id).unwrap(), &hw, Engine::Vllm);
        let e = est.estimate(&s).unwrap();
        ["ttft", "tpot"].map(|m| {
            let line = e.explain.iter().find(|l| l.metric == m).unwrap();
            line.formula.contains("block-FP8 GEMM floors")
        })
    };
    assert_eq!(names("deepseek-v3"), [true, true]);
    assert_eq!(names("llama-3.1-70b"), [false, false]);
}

#[test]
fn gpt_fast_int8_on_an_a100_reads_at_its_share_and_the_baseline_does_not() {
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("a100-sxm-80gb");
    let stream = |quant: &str, engine: Engine| Scenario {
        model: models.get("llama-2-7b").unwrap(),
        hw: &hw,
        quant: Quant::parse(quant).unwrap(),
        kv_bytes: 2.0,
        engine,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 5,
        gen_tokens: 200,
        context: 205,
        memory_headroom: 0.2,
        ubatch: None,
    };
    let shipped = Estimator::new(EfficiencyTable::defaults().unwrap());
    let eta = |est: &Estimator, s: &Scenario| est.factors_for(s).1.factor.efficiency;
    let (int8, bf16) = (
        stream("int8", Engine::GptFast),
        stream("bf16", Engine::GptFast),
    );
    let ratio = eta(&shipped, &int8) / eta(&shipped, &bf16);
    assert!((ratio - 1069.0 / 1397.0).abs() < 1e-9, "{ratio}");
    assert!(shipped.factors_for(&int8).1.level.contains("× 0.77"));
    // Half the bytes at 0.77 of the rate: faster than BF16, by less than 2×.
    let speedup = shipped.tpot_s(&bf16, 1.0, 100.0) / shipped.tpot_s(&int8, 1.0, 100.0);
    assert!(speedup > 1.3 && speedup < 1.8, "{speedup}");
    // Another engine's int8, and the constant-efficiency baseline, are untouched.
    let vllm = stream("int8", Engine::Vllm);
    assert_eq!(
        eta(&shipped, &vllm),
        eta(&shipped, &stream("bf16", Engine::Vllm))
    );
    let baseline = Estimator::new(EfficiencyTable::baseline());
    assert_eq!(eta(&baseline, &int8), eta(&baseline, &bf16));
}

#[test]
fn llama_cpp_moe_prompts_pay_whole_expert_tiles_per_micro_batch() {
    let models = ModelCatalogue::builtin().unwrap();
    let gpu = card("rtx-4090");
    let scenario = |model: &str, engine: Engine| Scenario {
        model: models.get(model).unwrap(),
        hw: &gpu,
        quant: Quant::parse("q4_k_m").unwrap(),
        kv_bytes: 2.0,
        engine,
        tp: 1,
        pp: 1,
        batch: 1,
        prompt_tokens: 512,
        gen_tokens: 1,
        context: 4096,
        memory_headroom: 0.1,
        ubatch: None,
    };
    let llama = scenario("qwen3-30b-a3b", Engine::LlamaCpp);
    let m = llama.model;
    let routed = m.routed_expert_params(8.0);
    // One 512-token micro-batch: the routed experts' FLOPs times the
    // padding factor, the rest of the model unpadded.
    let pad = m.expert_tile_padding(512.0, 128.0);
    let extra = llama.expert_tile_flops(512.0);
    assert!((extra - 2.0 * routed * 512.0 * (pad - 1.0)).abs() < 1.0);
    let vllm = scenario("qwen3-30b-a3b", Engine::Vllm);
    let (l, v) = (
        prefill_terms(&llama, 512.0, 1.0),
        prefill_terms(&vllm, 512.0, 1.0),
    );
    assert!(
        (l.flops - v.flops - extra).abs() < 1e3,
        "{} {}",
        l.flops,
        v.flops
    );
    // A 1,000-token prompt: a full micro-batch and one of 488 tokens.
    let two = llama.expert_tile_flops(1000.0);
    let rest = 2.0 * routed * 488.0 * (m.expert_tile_padding(488.0, 128.0) - 1.0);
    assert!((two - extra - rest).abs() < 1.0);
    // Four sequences of 128 tokens share one micro-batch: the pass pays
    // what one 512-token prompt pays, not four 128-token ones.
    let four = prefill_terms(&llama, 512.0, 4.0);
    let alone = prefill_terms(&llama, 128.0, 1.0);
    let unpadded = prefill_terms(&vllm, 512.0, 4.0);
    assert!((four.flops - unpadded.flops - extra).abs() < 1e3);
    assert!(four.flops < 4.0 * alone.flops);
    // Nothing for a dense model, an engine sizing GEMMs to the expert, or a
    // CPU.
    assert_eq!(
        scenario("llama-3.1-8b", Engine::LlamaCpp).expert_tile_flops(512.0),
        0.0
    );
    assert_eq!(vllm.expert_tile_flops(512.0), 0.0);
    let cpu = card("cpu-generic");
    let on_cpu = Scenario {
        hw: &cpu,
        ..llama.clone()
    };
    assert_eq!(on_cpu.expert_tile_flops(512.0), 0.0);
    // The plan names the padding beside its TTFT: the factor of a
    // 512-token prompt, with the counts it came from.
    let est = Estimator::new(crate::request::efficiency_table(None).unwrap());
    let line = |s: &Scenario| {
        est.estimate(s)
            .unwrap()
            .explain
            .into_iter()
            .find(|l| l.metric == "expert_tiles")
    };
    let tiles = line(&llama).unwrap();
    assert!((tiles.value - pad).abs() < 1e-9, "{} {pad}", tiles.value);
    assert!(
        tiles.inputs.contains("E = 128, k = 8, u = 512, w = 128"),
        "{}",
        tiles.inputs
    );
    assert!(line(&vllm).is_none());
    assert!(line(&scenario("llama-3.1-8b", Engine::LlamaCpp)).is_none());
    // A user's `--ubatch-size`: bigger micro-batches, fewer empty columns;
    // a logical batch never smaller than its micro-batch.
    let big = Scenario {
        ubatch: Some(2048),
        ..llama.clone()
    };
    assert_eq!(big.prompt_micro_batches(), Some((2048, 2048)));
    let huge = Scenario {
        ubatch: Some(4096),
        ..llama.clone()
    };
    assert_eq!(huge.prompt_micro_batches(), Some((4096, 4096)));
    assert_eq!(llama.prompt_micro_batches(), Some((2048, 512)));
    let per_token = |s: &Scenario| s.expert_tile_flops(2048.0) / 2048.0;
    assert!(per_token(&big) < 0.5 * per_token(&llama));
    assert_eq!(
        Scenario {
            ubatch: Some(2048),
            ..vllm.clone()
        }
        .prompt_micro_batches(),
        None
    );
}

#[test]
fn transformers_decode_moves_its_concatenated_kv_cache_three_times() {
    // transformers grows the cache with `torch.cat` each step: the old cache
    // is read and written again before attention reads it. A paged cache
    // (vLLM) is read once; the weights are the same for both.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("a100-sxm-80gb");
    let llama = models.get("llama-2-7b").unwrap();
    let paged = one_gpu(llama, &hw, Engine::Vllm, "fp16", (64, 256, 512));
    let cat = Scenario {
        engine: Engine::Transformers,
        ..paged.clone()
    };
    assert!(Engine::Transformers.concatenates_kv_cache());
    assert!(!Engine::Vllm.concatenates_kv_cache());
    assert_eq!(paged.kv_passes(), 1.0);
    assert_eq!(cat.kv_passes(), KV_CONCAT_PASSES);
    let (a, b) = (
        decode_terms(&paged, 64.0, 512.0),
        decode_terms(&cat, 64.0, 512.0),
    );
    let kv = 64.0 * 512.0 * paged.kv_bytes_per_token();
    assert!(
        (b.bytes - a.bytes - 2.0 * kv).abs() < 1.0,
        "{} {}",
        a.bytes,
        b.bytes
    );
    assert!((b.kv_memory_s - 3.0 * a.kv_memory_s).abs() < 1e-12);
    // At one token of context the copy is negligible.
    let one = decode_terms(&cat, 1.0, 1.0).bytes - decode_terms(&paged, 1.0, 1.0).bytes;
    assert!(one < 2.0 * paged.kv_bytes_per_token() + 1.0, "{one}");
    // Gemma 3's sliding-window layers get transformers' preallocated
    // HybridCache: no concatenation.
    let gemma = Scenario {
        model: models.get("gemma-3-27b").unwrap(),
        ..cat.clone()
    };
    assert_eq!(gemma.kv_passes(), 1.0);
    // The plan's TPOT line says so for transformers only.
    let est = Estimator::new(EfficiencyTable::priors_only());
    let tpot_inputs = |sc: &Scenario| explained(&est, sc, "tpot").inputs;
    assert_only_first_says(&tpot_inputs(&cat), &tpot_inputs(&paged), "moved 3 times");
}

#[test]
fn llama_cpp_replays_a_one_token_step_as_a_cuda_graph_from_ampere_on() {
    // ggml-cuda captures a one-token step as a CUDA graph on compute
    // capability 8.0 and later, with the weights not split by rows: the
    // launches it saves are counted per layer.
    use crate::engine::LLAMA_CPP_CUDA_GRAPH_SAVING_PER_LAYER_S as PER_LAYER;
    let models = ModelCatalogue::builtin().unwrap();
    let model = models.get("llama-3.1-8b").unwrap();
    let ada = card("rtx-4090");
    let mut turing = ada.clone();
    turing.compute_capability = Some(7.5);
    let graphs = one_gpu(model, &ada, Engine::LlamaCpp, "q4_k_m", (1, 16, 128));
    let saved = model.layers as f64 * PER_LAYER;
    assert!((graphs.cuda_graph_saving_s(1.0) - saved).abs() < 1e-15);
    // The same step on a Turing card launches every kernel: it is longer by
    // exactly what the graph saves.
    let eager = Scenario {
        hw: &turing,
        ..graphs.clone()
    };
    assert_eq!(eager.cuda_graph_saving_s(1.0), 0.0);
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let step = |sc: &Scenario| est.tpot_s(sc, 1.0, 64.0);
    assert!((step(&eager) - step(&graphs) - saved).abs() < 1e-12);
    // Two tokens a step, rows split over GPUs, builds before b3216, Ollama,
    // and other vendors: no graph. Builds b3216–b6326 replay it too.
    let mid = Scenario {
        engine: Engine::LlamaCppNoFa,
        ..graphs.clone()
    };
    assert!((mid.cuda_graph_saving_s(1.0) - saved).abs() < 1e-15);
    assert_eq!(graphs.cuda_graph_saving_s(2.0), 0.0);
    let row_split = Scenario {
        tp: 2,
        ..graphs.clone()
    };
    assert_eq!(row_split.cuda_graph_saving_s(1.0), 0.0);
    for engine in [Engine::LlamaCppCublas, Engine::Ollama, Engine::Vllm] {
        let other = Scenario {
            engine,
            ..graphs.clone()
        };
        assert_eq!(other.cuda_graph_saving_s(1.0), 0.0, "{engine}");
    }
    for id in ["mi300x", "v100-sxm2-32gb", "apple-m2-max", "h100-sxm"] {
        let hw = card(id);
        let sc = Scenario {
            hw: &hw,
            ..graphs.clone()
        };
        let want = if id == "h100-sxm" { saved } else { 0.0 };
        assert_eq!(sc.cuda_graph_saving_s(1.0), want, "{id}");
    }
    // The plan's TPOT formula names it where it applies.
    let formula = |sc: &Scenario| explained(&est, sc, "tpot").formula;
    assert_only_first_says(&formula(&graphs), &formula(&eager), "CUDA graph");
}

#[test]
fn llama_cpp_before_b3216_dequantises_quantised_weights_to_f16_before_each_cublas_gemm() {
    use crate::engine::F16_DEQUANT_BYTES_PER_WEIGHT as F16;
    let models = ModelCatalogue::builtin().unwrap();
    let model = models.get("llama-3.1-8b").unwrap();
    let ampere = card("rtx-3090");
    let old = one_gpu(
        model,
        &ampere,
        Engine::LlamaCppCublas,
        "q4_k_m",
        (1, 512, 1),
    );
    // A micro-batch of 512 tokens reads every weight once more and writes it in F16.
    let per_weight = F16 + old.quant.bytes_per_weight();
    let one = model.decode_read_params(512.0) * per_weight / old.bandwidth();
    assert!((old.f16_dequant_s(512.0) - one).abs() < 1e-12);
    // 513 tokens take two micro-batches; 33 tokens one.
    assert!((old.f16_dequant_s(513.0) - 2.0 * one).abs() < 1e-12);
    assert!(old.f16_dequant_s(33.0) > 0.0);
    // The kernel runs between the GEMMs: a prompt is longer by exactly it
    // than on the next range (b3216–b6326, MMQ), which is alike otherwise.
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let mmq = Scenario {
        engine: Engine::LlamaCppNoFa,
        ..old.clone()
    };
    let gap = est.prefill_pass_s(&old, 512.0) - est.prefill_pass_s(&mmq, 512.0);
    assert!((gap - one).abs() < 1e-12, "{gap} vs {one}");
    // No such kernel: 32 tokens or fewer (MMQ then too), F16 weights, later
    // builds and Ollama, GPUs without tensor cores, other vendors.
    assert_eq!(old.f16_dequant_s(32.0), 0.0);
    let f16 = one_gpu(model, &ampere, Engine::LlamaCppCublas, "fp16", (1, 512, 1));
    assert_eq!(f16.f16_dequant_s(512.0), 0.0);
    for engine in [Engine::LlamaCppNoFa, Engine::LlamaCpp, Engine::Ollama] {
        let later = Scenario {
            engine,
            ..old.clone()
        };
        assert_eq!(later.f16_dequant_s(512.0), 0.0, "{engine}");
    }
    let mut pascal = ampere.clone();
    pascal.compute_capability = Some(6.1);
    for hw in [pascal, card("mi300x"), card("apple-m2-max")] {
        let sc = Scenario {
            hw: &hw,
            ..old.clone()
        };
        assert_eq!(sc.f16_dequant_s(512.0), 0.0, "{}", hw.id);
    }
    // Volta has tensor cores and pays it.
    let volta = card("v100-sxm2-32gb");
    let sc = Scenario {
        hw: &volta,
        ..old.clone()
    };
    assert!(sc.f16_dequant_s(512.0) > 0.0);
    // The plan's TTFT formula names it where it applies.
    let formula = |sc: &Scenario| explained(&est, sc, "ttft").formula;
    assert_only_first_says(&formula(&old), &formula(&mmq), "F16 dequantising kernel");
}

#[test]
fn a_served_ttft_holds_the_server_path_and_the_prompt_rate_does_not() {
    // The plan's TTFT is what a client waits for: the prompt's pass plus the
    // server's path at one client. The prompt rate,
    // the closed-loop throughput and the baseline stay on the GPU's pass.
    let models = ModelCatalogue::builtin().unwrap();
    let hw = card("h100-sxm");
    let llama = models.get("llama-3.1-8b").unwrap();
    let vllm = one_gpu(llama, &hw, Engine::Vllm, "bf16", (1, 512, 128));
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let server = est.server_path_s(&vllm, 512.0);
    let profile = Engine::Vllm.profile(&hw);
    let want = profile.server_path_ms + 512.0 * profile.server_path_ms_per_prompt_token;
    assert!((server * 1e3 - want).abs() < 1e-12, "{server}");
    assert!(server > 0.0);
    // One client's path, below the loaded run's the simulator uses, and
    // longer for a longer prompt (rendered, tokenised and hashed on the host).
    assert!(server * 1e3 < profile.request_overhead_ms);
    assert!(est.server_path_s(&vllm, 8192.0) > server);
    let e = est.estimate(&vllm).unwrap();
    let pass = est.prefill_pass_s(&vllm, 512.0);
    assert!((e.ttft_ms - (pass + server) * 1e3).abs() < 1e-9);
    assert!((e.prefill_tok_s - 512.0 / pass).abs() < 1e-6);
    let line = explained(&est, &vllm, "ttft");
    assert!(line.formula.ends_with("server path"), "{}", line.formula);
    // SGLang's path is its own figure, at vLLM's cost per prompt token.
    let sglang = Scenario {
        engine: Engine::Sglang,
        ..vllm.clone()
    };
    let sp = Engine::Sglang.profile(&hw);
    assert!(sp.server_path_ms > 0.0 && sp.server_path_ms != profile.server_path_ms);
    let want = sp.server_path_ms + 512.0 * sp.server_path_ms_per_prompt_token;
    assert!((est.server_path_s(&sglang, 512.0) * 1e3 - want).abs() < 1e-12);
    // No published figure for TensorRT-LLM: its TTFT is the pass.
    let trt = Scenario {
        engine: Engine::TrtLlm,
        ..vllm.clone()
    };
    assert_eq!(est.server_path_s(&trt, 512.0), 0.0);
    let t = est.estimate(&trt).unwrap();
    assert!((t.ttft_ms - est.prefill_pass_s(&trt, 512.0) * 1e3).abs() < 1e-9);
    // A user's own measured path replaces the published fixed part, for an
    // engine without a figure too, and the TTFT line says whose it is.
    let mine = Estimator::new(EfficiencyTable::defaults().unwrap()).with_server_path_ms(Some(40.0));
    let want = 40.0 + 512.0 * profile.server_path_ms_per_prompt_token;
    assert!((mine.server_path_s(&vllm, 512.0) * 1e3 - want).abs() < 1e-12);
    assert!((mine.server_path_s(&trt, 512.0) * 1e3 - 40.0).abs() < 1e-12);
    let e = mine.estimate(&vllm).unwrap();
    assert!((e.ttft_ms - (pass * 1e3 + want)).abs() < 1e-9);
    let line = explained(&mine, &vllm, "ttft");
    assert!(
        line.inputs.contains("given with the plan"),
        "{}",
        line.inputs
    );
    // The constant-efficiency baseline stays a bare roofline.
    let baseline = Estimator::new(EfficiencyTable::baseline());
    assert_eq!(baseline.server_path_s(&vllm, 512.0), 0.0);
}

#[test]
fn llama_cpp_on_a_datacenter_card_with_a_geforce_die_takes_the_consumer_factors() {
    // docs/planner.md, "Datacenter cards on GeForce silicon".
    use crate::hardware::HardwareClass;
    let models = ModelCatalogue::builtin().unwrap();
    let m = models.get("llama-3.1-8b").unwrap();
    let (l40s, a100, r4090) = (card("l40s"), card("a100-sxm-80gb"), card("rtx-4090"));
    let run = (1, 512, 128);
    let cpp = one_gpu(m, &l40s, Engine::LlamaCpp, "q4_k_m", run);
    assert_eq!(cpp.factor_class(), HardwareClass::Consumer);
    let ollama = one_gpu(m, &l40s, Engine::Ollama, "q4_k_m", run);
    assert_eq!(ollama.factor_class(), HardwareClass::Consumer);
    let vllm = one_gpu(m, &l40s, Engine::Vllm, "fp16", run);
    assert_eq!(vllm.factor_class(), HardwareClass::Datacenter);
    let hbm = one_gpu(m, &a100, Engine::LlamaCpp, "q4_k_m", run);
    assert_eq!(hbm.factor_class(), HardwareClass::Datacenter);
    // The plan reads the factors of that class: the L40S's prompt pass
    // uses the same efficiency as the RTX 4090's.
    let est = Estimator::new(EfficiencyTable::defaults().unwrap());
    let geforce = one_gpu(m, &r4090, Engine::LlamaCpp, "q4_k_m", run);
    let (p_l40s, _) = est.factors_for(&cpp);
    let (p_4090, _) = est.factors_for(&geforce);
    let (p_a100, _) = est.factors_for(&hbm);
    assert_eq!(p_l40s.factor, p_4090.factor);
    assert_ne!(p_l40s.factor, p_a100.factor);
    // and the plan's factor line says whose factors they are.
    assert!(
        p_l40s.level.contains("as the l40s is a GeForce die"),
        "{}",
        p_l40s.level
    );
    assert!(!p_4090.level.contains("GeForce die"), "{}", p_4090.level);
}
