//! Block-scaled FP8 GEMMs at small batch: a time floor per kernel.
//!
//! DeepSeek-V3 and R1 publish their weights in FP8 with one scale per
//! 128 × 128 block (`quantization_config.weight_block_size`), and the
//! engines run those linear layers through block-FP8 GEMM kernels (vLLM's
//! CUTLASS and Triton `w8a8_block_fp8_matmul`, SGLang's Triton and
//! sgl-kernel ones). At small M their time hardly depends on the weight
//! bytes. Kernel tables of DeepSeek-V3's own shapes on H100-class GPUs,
//! batch 1–256 (sgl-project/sglang#5820 and #5207): N = 512, K = 7,168
//! (3.7 MB of weights, under 1 µs of HBM reads) takes 20.9 µs in vLLM's
//! kernel and 27 µs in SGLang's Triton one; N = 7,168, K = 2,304 (16.5 MB,
//! ~5 µs) 18.5 and 17.8 µs; only N = 7,168, K = 16,384 (117 MB) is bound by
//! its bytes (78–90 µs). So a GEMM takes at least [`FLOOR_S`]; the roofline
//! already charges its bytes (or FLOPs) and one kernel boundary
//! ([`KERNEL_BUBBLE_S`]), and the floor adds what is left.
//!
//! Counted: the linear layers outside the routed experts (the fused-MoE
//! kernel has a fixed cost of its own:
//! [`Engine::moe_extra_boundaries_per_layer`]). MLA layers: the query and
//! latent-KV down-projections (fused, and replicated at tensor parallel:
//! every rank computes the latent), the query up-projection and the output
//! projection; not the latent-KV up-projection, which vLLM's MLA
//! dequantizes at load and folds into attention. Other attention: QKV and
//! output. MLPs: gate-up and down, in dense layers and shared experts.
//!
//! Applies where the weights are the model's block-FP8 checkpoint (`fp8`
//! on a model marked `fp8_block`), on a GPU, in the engines the tables
//! measure (vLLM, SGLang).

use crate::engine::{Engine, KERNEL_BUBBLE_S};
use crate::model::ModelSpec;
use crate::quant::Quant;

/// The least time of one block-FP8 GEMM at small M: vLLM's kernel on
/// DeepSeek-V3's small shapes, 18.5–20.9 µs (module docs).
pub const FLOOR_S: f64 = 19e-6;

/// One forward pass on one device: its tokens, the tensor-parallel degree,
/// and the device's bandwidth (bytes/s) and peak (FLOP/s) for the weights'
/// format.
#[derive(Debug, Clone, Copy)]
pub struct Pass {
    pub tokens: f64,
    pub tp: f64,
    pub bandwidth: f64,
    pub peak_flops: f64,
}

/// The block-FP8 GEMMs of one forward pass outside the routed experts, per
/// device at tensor parallel `tp`: `(weight elements N × K, how many such
/// GEMMs)`.
pub fn gemms(m: &ModelSpec, tp: f64) -> Vec<(f64, f64)> {
    let h = m.hidden as f64;
    let layers = m.layers as f64;
    let mut out = Vec::new();
    match &m.mla {
        Some(a) => {
            let heads = m.heads as f64;
            let qk = (a.qk_nope_head_dim + a.qk_rope_head_dim) as f64;
            let latent = (a.kv_lora_rank + a.qk_rope_head_dim) as f64;
            match a.q_lora_rank {
                Some(r) => {
                    out.push((h * (r as f64 + latent), layers));
                    out.push((r as f64 * heads * qk / tp, layers));
                }
                None => {
                    out.push((h * latent, layers));
                    out.push((h * heads * qk / tp, layers));
                }
            }
            out.push((heads * a.v_head_dim as f64 * h / tp, layers));
        }
        None => {
            let q = (m.heads * m.head_dim) as f64;
            let kv = (2 * m.kv_heads * m.head_dim) as f64;
            out.push((h * (q + kv) / tp, layers));
            out.push((q * h / tp, layers));
        }
    }
    let (dense, shared) = match &m.moe {
        Some(moe) => (
            (m.layers - m.moe_layers()) as f64,
            Some((moe.expert_ffn * u64::from(moe.shared)) as f64).filter(|&w| w > 0.0),
        ),
        None => (layers, None),
    };
    let mlp = |width: f64, count: f64, out: &mut Vec<(f64, f64)>| {
        if count > 0.0 {
            out.push((h * 2.0 * width / tp, count));
            out.push((width * h / tp, count));
        }
    };
    mlp(m.ffn as f64, dense, &mut out);
    if let Some(width) = shared {
        mlp(width, m.moe_layers() as f64, &mut out);
    }
    out
}

/// What the floors add to a forward pass of `model` in `quant` on `engine`
/// (`gpu`: on a GPU), seconds: for each GEMM, [`FLOOR_S`] less its roofline
/// time at peak (bytes or FLOPs, whichever is longer) and its kernel
/// boundary, when positive. 0 where the floor does not apply (module docs).
pub fn extra_s(model: &ModelSpec, quant: &Quant, engine: Engine, gpu: bool, pass: Pass) -> f64 {
    let applies = model.fp8_block
        && quant.name == "fp8"
        && gpu
        && matches!(engine, Engine::Vllm | Engine::VllmV0 | Engine::Sglang);
    if !applies {
        return 0.0;
    }
    let bandwidth = pass.bandwidth.max(1.0);
    let peak = pass.peak_flops.max(1.0);
    gemms(model, pass.tp)
        .into_iter()
        .map(|(elements, count)| {
            let roof = (elements / bandwidth).max(2.0 * pass.tokens.max(1.0) * elements / peak);
            count * (FLOOR_S - roof - KERNEL_BUBBLE_S).max(0.0)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::HardwareCatalogue;
    use crate::model::ModelCatalogue;
    use crate::quant::ComputeDtype;

    #[test]
    fn deepseek_v3_fp8_at_tp8_pays_a_floor_per_small_gemm_and_nothing_elsewhere() {
        let models = ModelCatalogue::builtin().unwrap();
        let hw = HardwareCatalogue::builtin()
            .unwrap()
            .get("h200")
            .unwrap()
            .clone();
        let at = |model: &str, quant: &str, engine: Engine, tokens: f64| {
            let m = models.get(model).unwrap();
            let pass = Pass {
                tokens,
                tp: 8.0,
                bandwidth: crate::stream::read_gbps(&hw) * 1e9,
                peak_flops: hw.peak_tflops(ComputeDtype::Fp8) * 1e12,
            };
            let q = Quant::parse(quant).unwrap();
            let count = gemms(m, 8.0).iter().map(|&(_, n)| n).sum::<f64>();
            (count, extra_s(m, &q, engine, true, pass))
        };
        // 61 layers: fused down-projection, q up, output; 3 dense MLPs and
        // 58 shared experts, two GEMMs each.
        let (count, four) = at("deepseek-v3", "fp8", Engine::Vllm, 4.0);
        assert_eq!(count, 61.0 * 3.0 + 3.0 * 2.0 + 58.0 * 2.0);
        // Every one of them is far below the floor at batch 4 on an H200.
        let most = count * (FLOOR_S - KERNEL_BUBBLE_S);
        assert!(four > 0.7 * most && four < most, "{four} of at most {most}");
        assert_eq!(at("deepseek-v3", "fp8", Engine::Sglang, 4.0).1, four);
        // A prompt of thousands of tokens is bound by FLOPs: no floor left.
        assert_eq!(at("deepseek-v3", "fp8", Engine::Vllm, 16_384.0).1, 0.0);
        // Not the block-FP8 checkpoint, not an engine the tables measure.
        assert_eq!(at("deepseek-v3", "int4", Engine::Vllm, 4.0).1, 0.0);
        assert_eq!(at("deepseek-v3", "fp8", Engine::TrtLlm, 4.0).1, 0.0);
        assert_eq!(at("llama-3.1-70b", "fp8", Engine::Vllm, 4.0).1, 0.0);
    }
}
