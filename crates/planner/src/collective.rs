//! Latency of the per-layer all-reduce of tensor parallelism, by how the
//! engine performs it.
//!
//! A tensor-parallel decoder layer ends its attention and its MLP with an
//! all-reduce of a small activation (a few KiB per token), so at one
//! stream the call's latency, not its bytes, is what costs. Engines do it in
//! one of two ways:
//!
//! - **One-shot kernels** of their own over NVLink: vLLM's
//!   `custom_all_reduce` (on by default for NVLink-connected GPUs since
//!   0.3.0, vllm-project/vllm#2192), SGLang's copy of it and TensorRT-LLM's
//!   `AllReduce` plugin. Every GPU reads the others' buffers directly in one
//!   kernel, so the latency hardly grows with the GPU count:
//!   [`ONE_SHOT_LATENCY_S`], the planner's long-standing figure.
//! - **NCCL's ring**: gpt-fast (`funcol.all_reduce` in its `tp.py`), TGI
//!   (`torch.distributed.all_reduce` in its row-parallel linear layers) and
//!   FasterTransformer (`ftNcclAllReduceSum`), and TensorRT-LLM engines
//!   built by NeMo's 2023–24 export, which sets TensorRT-LLM's NCCL plugin
//!   (`set_nccl_plugin` in `nemo/export/trt_llm/tensorrt_llm_build.py`)
//!   rather than its custom all-reduce. NCCL's own cost model (`src/graph/tuning.cc`) puts a
//!   ring all-reduce with its low-latency protocol at a base latency plus
//!   one hop latency per step, and a ring all-reduce over `n` GPUs takes
//!   `2(n − 1)` steps: [`NCCL_RING_BASE_S`] + `2(n − 1)` ×
//!   ([`NCCL_NVLINK_HOP_S`] or [`NCCL_PCIE_HOP_S`]). At 8 GPUs on NVLink
//!   that is 15 µs a call, 160 calls a token for a 80-layer model.
//!
//! Other engines keep the one-shot figure (their fits were made with it;
//! the engines whose all-reduce is not stated here are not moved).

use crate::engine::Engine;
use crate::hardware::Interconnect;

/// One all-reduce call of a one-shot NVLink kernel (launch and
/// synchronisation), seconds.
pub const ONE_SHOT_LATENCY_S: f64 = 10e-6;
/// NCCL's base latency of a ring all-reduce with the LL protocol
/// (`baseLat`, Ring/LL, in `src/graph/tuning.cc`), seconds.
pub const NCCL_RING_BASE_S: f64 = 6.6e-6;
/// NCCL's latency per ring step over NVLink (`hwLat[NVLINK]`, Ring/LL).
pub const NCCL_NVLINK_HOP_S: f64 = 0.6e-6;
/// NCCL's latency per ring step over PCIe (`hwLat[PCI]`, Ring/LL).
pub const NCCL_PCIE_HOP_S: f64 = 1.0e-6;

/// How an engine performs a tensor-parallel all-reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllReduce {
    /// A one-shot kernel of the engine's own: flat latency.
    OneShot,
    /// NCCL's ring: latency grows with the GPU count.
    NcclRing,
}

/// Whether `link` is NVLink (or an NVLink-class fabric the engines' custom
/// kernels use: NVSwitch, AMD Infinity Fabric).
fn is_nvlink_class(link: &Interconnect) -> bool {
    let name = link.name.to_ascii_lowercase();
    name.contains("nvlink") || name.contains("infinity fabric")
}

/// How `engine` all-reduces.
pub fn kind(engine: Engine) -> AllReduce {
    match engine {
        Engine::GptFast | Engine::Tgi | Engine::FasterTransformer | Engine::Nemo => {
            AllReduce::NcclRing
        }
        _ => AllReduce::OneShot,
    }
}

/// Latency of one all-reduce call over `n` GPUs, seconds (its bytes are
/// counted apart, by the caller).
pub fn latency_s(engine: Engine, n: u32, link: &Interconnect) -> f64 {
    match kind(engine) {
        AllReduce::OneShot => ONE_SHOT_LATENCY_S,
        AllReduce::NcclRing => {
            let hop = if is_nvlink_class(link) {
                NCCL_NVLINK_HOP_S
            } else {
                NCCL_PCIE_HOP_S
            };
            NCCL_RING_BASE_S + 2.0 * f64::from(n.max(1) - 1) * hop
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str) -> Interconnect {
        Interconnect {
            name: name.into(),
            gbps: 300.0,
        }
    }

    #[test]
    fn nccl_ring_latency_grows_with_the_gpu_count_one_shot_does_not() {
        let nv = link("NVLink 3");
        let at = |e, n| latency_s(e, n, &nv) * 1e6;
        // NCCL's model: 6.6 + 2(n-1)·0.6 µs.
        assert!((at(Engine::GptFast, 2) - 7.8).abs() < 1e-9);
        assert!((at(Engine::GptFast, 8) - 15.0).abs() < 1e-9);
        assert!(at(Engine::Tgi, 8) > at(Engine::Tgi, 4));
        // vLLM's custom all-reduce on NVLink: flat.
        assert_eq!(at(Engine::Vllm, 2), at(Engine::Vllm, 8));
        assert_eq!(kind(Engine::TrtLlm), AllReduce::OneShot);
    }

    #[test]
    fn nccl_over_pcie_pays_pcie_hops() {
        let pcie = link("PCIe 4.0 x16");
        let us = latency_s(Engine::GptFast, 4, &pcie) * 1e6;
        assert!((us - 12.6).abs() < 1e-9, "{us}");
        assert_eq!(latency_s(Engine::Vllm, 4, &pcie), ONE_SHOT_LATENCY_S);
    }
}
