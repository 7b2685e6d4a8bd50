//! Unit tests of `efficiency` (engine names, lookup fallback, priors).

use super::*;
use crate::engine::GRAPH_REPLAY_HOST_MS;
use crate::hardware::HardwareCatalogue;

#[test]
fn engine_names_and_aliases() {
    assert_eq!(Engine::parse("TensorRT-LLM").unwrap(), Engine::TrtLlm);
    assert_eq!(Engine::parse("ollama").unwrap(), Engine::Ollama);
    assert_eq!(Engine::Ollama.family(), Engine::LlamaCpp);
    assert_eq!(
        Engine::parse("text-generation-inference").unwrap(),
        Engine::Tgi
    );
    assert_eq!(Engine::Tgi.to_string(), "tgi");
    let e = Engine::parse("vlm").unwrap_err();
    assert!(e.to_string().contains("did you mean `vllm`"), "{e}");
}

#[test]
fn fallback_order() {
    let mut t = EfficiencyTable::priors_only();
    let p = t.lookup(HardwareClass::Apple, Engine::Mlc, Phase::Decode);
    assert_eq!(p.factor, prior(HardwareClass::Apple, Phase::Decode));
    t.entries.push(Entry {
        class: "apple".into(),
        engine: "*".into(),
        phase: Phase::Decode,
        efficiency: 0.5,
        overhead_ms: 1.0,
        rows: 3,
        overhead_fitted: true,
    });
    let r = t.lookup(HardwareClass::Apple, Engine::Mlc, Phase::Decode);
    assert_eq!(r.factor.efficiency, 0.5);
    assert!(r.level.contains("apple/*"));
    // Eager PyTorch reads the weights with the class's kernels (the same
    // cuBLAS calls) and pays 3x the class's step overhead between them.
    let hf = t.lookup(HardwareClass::Apple, Engine::Transformers, Phase::Decode);
    assert!((hf.factor.efficiency - 0.5).abs() < 1e-12, "{hf:?}");
    assert!((hf.factor.overhead_ms - 3.0).abs() < 1e-12, "{hf:?}");
}

#[test]
fn graph_replaying_engines_pay_less_per_step_than_llama_cpp() {
    // The shipped fit: llama.cpp has datacenter decode rows of its own;
    // vLLM, SGLang and TensorRT-LLM fall back to the pooled class fit.
    let t = EfficiencyTable::defaults().unwrap();
    for class in [HardwareClass::Datacenter, HardwareClass::Consumer] {
        let llama = t.lookup(class, Engine::LlamaCpp, Phase::Decode).factor;
        for e in [Engine::Vllm, Engine::Sglang, Engine::TrtLlm, Engine::Tgi] {
            assert_eq!(e.step_launch(), StepLaunch::GraphReplay);
            let r = t.lookup(class, e, Phase::Decode);
            assert!(
                r.factor.overhead_ms < llama.overhead_ms,
                "{class:?} {e}: {r:?} vs llama.cpp {llama:?}"
            );
            let cap = e.step_overhead_cap_ms(Some(class), Phase::Decode).unwrap();
            assert!(r.factor.overhead_ms <= cap, "{e}: {r:?}");
            // SGLang's kernel gaps are counted per layer: its cap is the host part.
            let want = match e {
                Engine::Vllm => VLLM_GRAPH_REPLAY_STEP_OVERHEAD_MS,
                Engine::Sglang => GRAPH_REPLAY_HOST_MS,
                _ => GRAPH_REPLAY_STEP_OVERHEAD_MS,
            };
            assert_eq!(cap, want, "{e}");
        }
    }
    // Priors alone: the same ordering, and per-kernel engines untouched.
    let p = EfficiencyTable::priors_only();
    let dc = prior(HardwareClass::Datacenter, Phase::Decode);
    let llama = p.lookup(HardwareClass::Datacenter, Engine::LlamaCpp, Phase::Decode);
    assert_eq!(llama.factor, dc);
    let sg = p.lookup(HardwareClass::Datacenter, Engine::Sglang, Phase::Decode);
    assert!(sg.factor.overhead_ms < llama.factor.overhead_ms, "{sg:?}");
    assert_eq!(sg.factor.efficiency, dc.efficiency);
    assert!(sg.level.contains("CUDA-graph"), "{sg:?}");
    // Prefill passes and non-CUDA classes keep the class figures.
    let pf = p.lookup(HardwareClass::Datacenter, Engine::Vllm, Phase::Prefill);
    assert_eq!(pf.factor, prior(HardwareClass::Datacenter, Phase::Prefill));
    let cpu = p.lookup(HardwareClass::Cpu, Engine::Vllm, Phase::Decode);
    assert_eq!(cpu.factor, prior(HardwareClass::Cpu, Phase::Decode));
}

#[test]
fn an_engine_with_its_own_fit_keeps_it() {
    let mut t = EfficiencyTable::priors_only();
    t.entries.push(Entry {
        class: "datacenter".into(),
        engine: "sglang".into(),
        phase: Phase::Decode,
        efficiency: 0.7,
        overhead_ms: 3.5,
        rows: 12,
        overhead_fitted: true,
    });
    let r = t.lookup(HardwareClass::Datacenter, Engine::Sglang, Phase::Decode);
    assert_eq!((r.factor.efficiency, r.factor.overhead_ms), (0.7, 3.5));
    assert_eq!(r.level, "fit datacenter/sglang");
}

#[test]
fn engine_profiles_follow_documented_defaults() {
    let hw = HardwareCatalogue::builtin().unwrap();
    let gpu = |id: &str| hw.get(id).unwrap();
    // vLLM V1 raises max_num_seqs and max_num_batched_tokens on devices with
    // at least 70 GiB, except the A100.
    let small = Engine::Vllm.profile(gpu("rtx-4090"));
    assert_eq!(
        (small.max_running, small.max_batched_tokens),
        (Some(256), 2048)
    );
    let large = Engine::Vllm.profile(gpu("h100-sxm"));
    assert_eq!(
        (large.max_running, large.max_batched_tokens),
        (Some(1024), 8192)
    );
    for a100 in ["a100-sxm-80gb", "a100-pcie-80gb"] {
        let p = Engine::Vllm.profile(gpu(a100));
        assert_eq!(
            (p.max_running, p.max_batched_tokens),
            (Some(256), 2048),
            "{a100}"
        );
    }
    assert_eq!(Engine::Tgi.profile(gpu("h100-sxm")).max_running, Some(128));
    assert_eq!(Engine::Sglang.profile(gpu("h100-sxm")).max_running, None);
    assert_eq!(
        Engine::Sglang.profile(gpu("rtx-4090")).max_batched_tokens,
        2048
    );
    assert_eq!(
        Engine::Sglang
            .profile(gpu("a100-sxm-80gb"))
            .max_batched_tokens,
        8192
    );
    for e in Engine::ALL {
        let p = e.profile(gpu("h100-sxm"));
        assert!((0.0..0.5).contains(&p.memory_reserve) && p.per_seq_overhead_ms >= 0.0);
        assert!(p.max_batched_tokens >= 512, "{e}: {p:?}");
    }
}

#[test]
fn baseline_is_constant() {
    let b = EfficiencyTable::baseline();
    let d = b
        .lookup(HardwareClass::Apple, Engine::LlamaCpp, Phase::Decode)
        .factor;
    assert_eq!((d.efficiency, d.overhead_ms), (0.7, 3.0));
    let p = b
        .lookup(HardwareClass::Datacenter, Engine::Vllm, Phase::Prefill)
        .factor;
    assert_eq!(p.efficiency, 0.5);
}

#[test]
fn shipped_defaults_parse() {
    let t = EfficiencyTable::defaults().unwrap();
    let text = t.to_toml().unwrap();
    let back = EfficiencyTable::from_toml(&text, "roundtrip").unwrap();
    assert_eq!(back.entries, t.entries);
}

#[test]
fn out_of_range_factor_is_rejected() {
    let bad =
        "[[factor]]\nclass='apple'\nengine='*'\nphase='decode'\nefficiency=-1\noverhead_ms=0\n";
    assert_eq!(
        EfficiencyTable::from_toml(bad, "x").unwrap_err().code(),
        "planner.invalid"
    );
}

#[test]
fn nemo_export_pays_the_class_step_overhead_and_nccl_all_reduces() {
    // NeMo's 2023–24 TensorRT-LLM export: the same engine kernels as
    // TensorRT-LLM (its family), but each step is driven from TensorRT-LLM's
    // Python GenerationSession without CUDA graphs, and the engine is built
    // with the NCCL plugin.
    let t = EfficiencyTable::defaults().unwrap();
    let class = HardwareClass::Datacenter;
    assert_eq!(Engine::parse("nemo").unwrap(), Engine::Nemo);
    assert_eq!(Engine::parse("NeMo-TRTLLM").unwrap(), Engine::Nemo);
    assert_eq!(Engine::Nemo.family(), Engine::TrtLlm);
    assert_eq!(Engine::Nemo.step_launch(), StepLaunch::PerKernel);
    assert_eq!(
        Engine::Nemo.step_overhead_cap_ms(Some(class), Phase::Decode),
        None
    );
    let nemo = t.lookup(class, Engine::Nemo, Phase::Decode).factor;
    let trt = t.lookup(class, Engine::TrtLlm, Phase::Decode).factor;
    // The class's factor for engines without decode rows of their own (its
    // pooled fit where it pools two engines, else its documented prior),
    // with the per-kernel overhead uncapped.
    let pooled = t
        .find("datacenter", "*", Phase::Decode)
        .unwrap_or_else(|| prior(class, Phase::Decode));
    assert_eq!(nemo, pooled, "the class's per-kernel overhead, uncapped");
    assert!(nemo.overhead_ms > trt.overhead_ms, "{nemo:?} vs {trt:?}");
    assert_eq!(nemo.efficiency, trt.efficiency);
    // Prefill uses TensorRT-LLM's own fit: the same context kernels.
    assert_eq!(
        t.lookup(class, Engine::Nemo, Phase::Prefill).factor,
        t.lookup(class, Engine::TrtLlm, Phase::Prefill).factor
    );
    let link = crate::hardware::Interconnect {
        name: "NVLink 4".into(),
        gbps: 450.0,
    };
    let at = |e, n| crate::collective::latency_s(e, n, &link);
    assert!(at(Engine::Nemo, 8) > at(Engine::Nemo, 2));
    assert_eq!(at(Engine::TrtLlm, 8), at(Engine::TrtLlm, 2));
    // One static batch, prompts as one pass of their own.
    let hw = HardwareCatalogue::builtin().unwrap();
    let p = Engine::Nemo.profile(hw.get("h100-sxm").unwrap());
    assert!(!p.chunked_prefill && p.max_running.is_none());
    assert!(!Engine::Nemo.pipelines_micro_batches());
}

#[test]
fn a_class_pool_lends_no_engine_llama_cpp_kernels() {
    // llama.cpp has a fit of its own on the datacenter class (XiongjieDai's
    // llama-bench rows on the A100 and H100 PCIe; the L40S and A40 rows fit
    // the consumer level, their dies being GeForce ones); its rows stay out of
    // the class's pool, so vLLM, which has no prompt rows, reads the
    // datacenter prior rather than ggml's prompt efficiency.
    let t = EfficiencyTable::defaults().unwrap();
    let dc = HardwareClass::Datacenter;
    let own = t
        .entries
        .iter()
        .find(|e| e.class == "datacenter" && e.engine == "llama.cpp" && e.phase == Phase::Prefill)
        .unwrap();
    assert!(own.rows >= 60, "{own:?}");
    assert!(t.find("datacenter", "*", Phase::Prefill).is_none());
    let vllm = t.lookup(dc, Engine::Vllm, Phase::Prefill);
    assert_eq!(vllm.factor, prior(dc, Phase::Prefill), "{}", vllm.level);
    let cpp = t.lookup(dc, Engine::LlamaCpp, Phase::Prefill).factor;
    assert!(cpp.efficiency < vllm.factor.efficiency, "{cpp:?}");
    // Ollama runs llama.cpp: it reads llama.cpp's own fit.
    assert_eq!(t.lookup(dc, Engine::Ollama, Phase::Prefill).factor, cpp);
}
