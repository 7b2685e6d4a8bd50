//! Unit tests of the engine profiles and their version ranges.

use super::*;

#[test]
fn a_version_before_0_6_picks_the_old_vllm_profile_and_later_ones_the_current() {
    assert_eq!(Engine::parse("vllm@0.5").ok(), Some(Engine::VllmV0));
    assert_eq!(Engine::parse("vLLM@v0.5.3").ok(), Some(Engine::VllmV0));
    assert_eq!(Engine::parse("vllm@0.2.0").ok(), Some(Engine::VllmV0));
    assert_eq!(Engine::parse("vllm@0.6.0").ok(), Some(Engine::Vllm));
    assert_eq!(Engine::parse("vllm@0.11").ok(), Some(Engine::Vllm));
    assert_eq!(Engine::parse("vllm").ok(), Some(Engine::Vllm));
    // An engine without version ranges takes any version.
    assert_eq!(Engine::parse("sglang@0.3.2").ok(), Some(Engine::Sglang));
}

#[test]
fn a_llama_cpp_build_before_b6327_writes_attention_scores_to_memory_and_later_ones_do_not() {
    assert_eq!(Engine::parse("llama.cpp").ok(), Some(Engine::LlamaCpp));
    assert_eq!(
        Engine::parse("llama.cpp@b6327").ok(),
        Some(Engine::LlamaCpp)
    );
    assert_eq!(
        Engine::parse("llama-server@b7000").ok(),
        Some(Engine::LlamaCpp)
    );
    assert_eq!(
        Engine::parse("llama.cpp@b6326").ok(),
        Some(Engine::LlamaCppNoFa)
    );
    assert_eq!(
        Engine::parse("llama.cpp@3216").ok(),
        Some(Engine::LlamaCppNoFa)
    );
    // The canonical name of the old range parses back to it.
    let old = Engine::LlamaCppNoFa;
    assert_eq!(Engine::parse(old.as_str()).ok(), Some(old));
    assert!(old.materialises_attention_scores());
    assert!(!Engine::LlamaCpp.materialises_attention_scores());
    assert_eq!(old.family(), Engine::LlamaCpp);
    let e = Engine::parse("llama.cpp@0.5").unwrap_err().to_string();
    assert!(e.contains("build number"), "{e}");
    // Not a name of its own: only a version reaches it.
    assert!(Engine::parse("llamacppnofa").is_err());
}

#[test]
fn a_malformed_version_is_refused_with_a_hint() {
    for bad in ["vllm@", "vllm@abc", "vllm@0.5.x", "vllm@1.2.3.4"] {
        let e = Engine::parse(bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains(bad) && e.contains("vllm@0.5"), "{bad}: {e}");
    }
    let e = Engine::parse("olama")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("ollama"), "{e}");
}

#[test]
fn every_engine_name_parses_back_to_itself() {
    for e in Engine::ALL {
        assert_eq!(Engine::parse(e.as_str()).ok(), Some(e), "{e}");
    }
    for (alias, e) in [
        ("ExLlama2", Engine::ExLlamaV2),
        ("turbomind", Engine::Lmdeploy),
        ("faster-transformer", Engine::FasterTransformer),
        ("llama-server", Engine::LlamaCpp),
    ] {
        assert_eq!(Engine::parse(alias).ok(), Some(e), "{alias}");
    }
}

#[test]
fn engines_built_on_another_share_its_family_and_its_multi_gpu_habit() {
    assert_eq!(Engine::Ollama.family(), Engine::LlamaCpp);
    assert_eq!(Engine::VllmV0.family(), Engine::Vllm);
    assert_eq!(Engine::Lmdeploy.family(), Engine::TrtLlm);
    assert_eq!(Engine::GptFast.family(), Engine::GptFast);
    assert!(Engine::Ollama.materialises_attention_scores());
    assert_eq!(Engine::LlamaCpp.multi_gpu_default(), MultiGpu::Layer);
    assert_eq!(Engine::Vllm.multi_gpu_default(), MultiGpu::Tensor);
    assert_eq!(Engine::Ollama.multi_gpu_default(), MultiGpu::OneThenLayer);
    assert!(!Engine::LlamaCpp.pipelines_micro_batches());
    assert!(Engine::Vllm.pipelines_micro_batches());
}

#[test]
fn gpt_fast_reads_quantised_weights_at_its_readmes_share_of_bf16() {
    let q = |name| crate::quant::Quant::parse(name).unwrap();
    let int8 = Engine::GptFast.quantised_read_share(&q("int8"), true);
    let int4 = Engine::GptFast.quantised_read_share(&q("int4"), true);
    assert!((int8 - 0.765).abs() < 0.01 && (int4 - 0.618).abs() < 0.01);
    for other in ["bf16", "fp8", "nvfp4"] {
        assert_eq!(Engine::GptFast.quantised_read_share(&q(other), true), 1.0);
    }
    assert_eq!(Engine::GptFast.quantised_read_share(&q("int8"), false), 1.0);
    assert_eq!(Engine::Vllm.quantised_read_share(&q("int4"), true), 1.0);
    // Its int8 is weight-only: BF16 matmuls; vLLM's int8 is W8A8.
    use crate::quant::ComputeDtype;
    assert_eq!(
        Engine::GptFast.weight_compute(&q("int8")),
        ComputeDtype::Fp16
    );
    assert_eq!(Engine::Vllm.weight_compute(&q("int8")), ComputeDtype::Int8);
    assert_eq!(Engine::GptFast.weight_compute(&q("fp8")), ComputeDtype::Fp8);
}

#[test]
fn a_llama_cpp_build_before_b3216_dequantises_its_weights_for_cublas() {
    assert_eq!(
        Engine::parse("llama.cpp@b3215").ok(),
        Some(Engine::LlamaCppCublas)
    );
    assert_eq!(
        Engine::parse("llama.cpp@1786").ok(),
        Some(Engine::LlamaCppCublas)
    );
    let old = Engine::LlamaCppCublas;
    assert_eq!(Engine::parse(old.as_str()).ok(), Some(old));
    assert!(old.dequantises_weights_for_cublas());
    assert!(old.materialises_attention_scores());
    assert!(old.accumulates_in_fp16());
    assert_eq!(old.family(), Engine::LlamaCpp);
    for later in [Engine::LlamaCppNoFa, Engine::LlamaCpp, Engine::Ollama] {
        assert!(!later.dequantises_weights_for_cublas(), "{later}");
    }
    // Not a name of its own: only a version reaches it.
    assert!(Engine::parse("llamacppcublas").is_err());
}
