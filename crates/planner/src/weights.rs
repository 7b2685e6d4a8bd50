//! Weight bytes of a model in a format, where a format may cover only the
//! routed experts.
//!
//! MXFP4 checkpoints quantise the experts and keep the rest in BF16:
//! OpenAI's gpt-oss files list attention, router, embeddings and LM head in
//! `modules_to_not_convert`, and vLLM's `Mxfp4Config` serves linear layers
//! unquantised (`UnquantizedLinearMethod`) and only `FusedMoE` layers in
//! MXFP4. So gpt-oss-20b is about 13.8 GB, not the 11.1 GB that 4.25 bits for
//! every weight would give, and a decode step reads its attention and LM
//! head at 2 bytes a weight. llama.cpp's MXFP4 GGUF keeps them in Q8_0
//! instead ([`Engine::experts_only_rest_bytes`]): 12.1 GB. Every other format
//! covers every weight.

use crate::engine::Engine;
use crate::model::ModelSpec;
use crate::quant::Quant;

impl ModelSpec {
    /// Routed-expert parameters over the layers with experts when
    /// `experts_used` experts per layer are counted (0 for a dense model).
    pub fn routed_expert_params(&self, experts_used: f64) -> f64 {
        match &self.moe {
            Some(m) => self.moe_layers() as f64 * experts_used * self.gated_ffn(m.expert_ffn),
            None => 0.0,
        }
    }

    /// Every routed expert's parameters (0 for a dense model).
    pub fn all_routed_expert_params(&self) -> f64 {
        let experts = self.moe.as_ref().map_or(0.0, |m| f64::from(m.experts));
        self.routed_expert_params(experts)
    }

    /// Bytes of `params` parameters, `routed` of them routed-expert weights,
    /// in `quant` as `engine` loads it.
    fn bytes_in(params: f64, routed: f64, quant: &Quant, engine: Engine) -> f64 {
        if quant.experts_only && routed > 0.0 {
            let rest = (params - routed).max(0.0);
            routed * quant.bytes_per_weight() + rest * engine.experts_only_rest_bytes()
        } else {
            params * quant.bytes_per_weight()
        }
    }

    /// Bytes of all the weights in `quant` as `engine` loads it: what sits
    /// in memory.
    pub fn weight_bytes(&self, quant: &Quant, engine: Engine) -> f64 {
        Self::bytes_in(
            self.total_params(),
            self.all_routed_expert_params(),
            quant,
            engine,
        )
    }

    /// Bytes of the weights one step over `batch` tokens reads in `quant` as
    /// `engine` loads it ([`ModelSpec::decode_read_params`]).
    pub fn read_bytes(&self, batch: f64, quant: &Quant, engine: Engine) -> f64 {
        Self::bytes_in(
            self.decode_read_params(batch),
            self.routed_expert_params(self.distinct_experts(batch)),
            quant,
            engine,
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::model::ModelCatalogue;
    use crate::quant::Quant;

    const VLLM: Engine = Engine::Vllm;

    #[test]
    fn mxfp4_covers_the_experts_and_leaves_the_rest_in_bf16() {
        let c = ModelCatalogue::builtin().unwrap();
        let mx = Quant::parse("mxfp4").unwrap();
        assert!(mx.experts_only);
        // gpt-oss-20b's checkpoint is about 13.8 GB (12.8 GiB).
        let small = c.get("gpt-oss-20b").unwrap().weight_bytes(&mx, VLLM) / 1e9;
        assert!((13.0..14.5).contains(&small), "{small}");
        // gpt-oss-120b's is about 65 GB.
        let big = c.get("gpt-oss-120b").unwrap().weight_bytes(&mx, VLLM) / 1e9;
        assert!((63.0..67.0).contains(&big), "{big}");
        // One token reads 4 experts in MXFP4 and everything else in BF16.
        let m = c.get("gpt-oss-120b").unwrap();
        let routed = m.routed_expert_params(m.distinct_experts(1.0));
        let read = m.read_bytes(1.0, &mx, VLLM);
        let rest = m.decode_read_params(1.0) - routed;
        assert!((read - (routed * 4.25 / 8.0 + rest * 2.0)).abs() < 1.0);
        // A dense model in MXFP4 has no experts: the format covers it all.
        let llama = c.get("llama-3.1-8b").unwrap();
        assert_eq!(
            llama.weight_bytes(&mx, VLLM),
            llama.total_params() * 4.25 / 8.0
        );
        // Other formats cover every weight of an MoE model.
        let fp8 = Quant::parse("fp8").unwrap();
        assert_eq!(m.weight_bytes(&fp8, VLLM), m.total_params());
    }

    #[test]
    fn llama_cpp_keeps_the_rest_of_an_mxfp4_model_in_q8_0() {
        let c = ModelCatalogue::builtin().unwrap();
        let mx = Quant::parse("mxfp4").unwrap();
        let m = c.get("gpt-oss-20b").unwrap();
        // ggml-org's gpt-oss-20b MXFP4 GGUF: 11.27 GiB (12.1 GB), against the
        // checkpoint's 13.8 GB that vLLM and Ollama load.
        let gguf = m.weight_bytes(&mx, Engine::LlamaCpp) / 1e9;
        assert!((11.8..12.4).contains(&gguf), "{gguf}");
        assert_eq!(
            m.weight_bytes(&mx, Engine::LlamaCppNoFa),
            m.weight_bytes(&mx, Engine::LlamaCpp)
        );
        assert!(m.weight_bytes(&mx, Engine::Ollama) / 1e9 > 13.0);
        // A decode step reads the same experts, and the rest at 8.5 bits.
        let routed = m.routed_expert_params(m.distinct_experts(1.0));
        let rest = m.decode_read_params(1.0) - routed;
        let read = m.read_bytes(1.0, &mx, Engine::LlamaCpp);
        assert!((read - (routed * 4.25 / 8.0 + rest * 34.0 / 32.0)).abs() < 1.0);
        // Formats that cover every weight do not depend on the engine.
        let q4 = Quant::parse("q4_k_m").unwrap();
        assert_eq!(
            m.weight_bytes(&q4, Engine::LlamaCpp),
            m.weight_bytes(&q4, VLLM)
        );
    }
}
