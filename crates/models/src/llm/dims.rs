//! The size of a loaded model, and the least work a token costs it: what a
//! benchmark figure is checked against (`cpu::bound`).

/// Sizes of a loaded model, as llama.cpp reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ModelDims {
    /// Parameters in all tensors.
    pub params: u64,
    /// Bytes of all tensors (quantised).
    pub bytes: u64,
    pub n_vocab: u32,
    /// Width of the residual stream.
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_head: u32,
    /// Key/value heads (fewer than `n_head` with grouped-query attention).
    pub n_head_kv: u32,
}

impl ModelDims {
    /// Parameters of one vocabulary × width table (token embeddings, and
    /// the output head, which small models share with them).
    fn table(&self) -> u64 {
        u64::from(self.n_vocab) * u64::from(self.n_embd)
    }

    /// The fewest arithmetic operations one prompt token costs: a
    /// multiply-add (two operations) per weight that every prompt token
    /// goes through. The embedding table is a lookup, and the output head
    /// runs for the last token only, so both are left out (whether or not
    /// the file shares them); so is attention, which only adds work.
    pub fn min_prompt_ops_per_token(&self) -> f64 {
        2.0 * self.params.saturating_sub(2 * self.table()) as f64
    }

    /// The fewest bytes one decoded token reads at `context` tokens of
    /// context: every weight but one embedding table (the input table is
    /// read a row at a time; a shared table is read in full for the logits,
    /// so this errs low there), at the file's mean bytes per weight, plus
    /// the keys and values cached so far (16-bit, llama.cpp's default).
    pub fn min_decode_bytes_per_token(&self, context: usize) -> f64 {
        let per_weight = self.bytes as f64 / self.params.max(1) as f64;
        let weights = self.params.saturating_sub(self.table()) as f64 * per_weight;
        let head_dim = f64::from(self.n_embd) / f64::from(self.n_head.max(1));
        let kv_per_token =
            2.0 * f64::from(self.n_layer) * f64::from(self.n_head_kv) * head_dim * 2.0;
        weights + kv_per_token * context as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct Q4_1's sizes (llama.cpp's report of the file).
    fn smollm2() -> ModelDims {
        ModelDims {
            params: 134_515_008,
            bytes: 96_576_768,
            n_vocab: 49_152,
            n_embd: 576,
            n_layer: 30,
            n_head: 9,
            n_head_kv: 3,
        }
    }

    #[test]
    fn a_prompt_token_costs_two_operations_per_weight_outside_the_tables() {
        let m = smollm2();
        let table = 49_152.0 * 576.0;
        assert_eq!(
            m.min_prompt_ops_per_token(),
            2.0 * (134_515_008.0 - 2.0 * table)
        );
        // A model made only of its tables does no per-token matmul work.
        let tables_only = ModelDims {
            params: 2 * 49_152 * 576,
            ..m
        };
        assert_eq!(tables_only.min_prompt_ops_per_token(), 0.0);
    }

    #[test]
    fn a_decoded_token_reads_the_weights_and_a_growing_kv_cache() {
        let m = smollm2();
        let empty = m.min_decode_bytes_per_token(0);
        let share = (134_515_008.0 - 49_152.0 * 576.0) / 134_515_008.0;
        assert!((empty - 96_576_768.0 * share).abs() < 1.0, "{empty}");
        // 30 layers × 3 KV heads × 64 dims × (K and V) × 2 bytes per token.
        let per_token = m.min_decode_bytes_per_token(1) - empty;
        assert!(
            (per_token - 30.0 * 3.0 * 64.0 * 2.0 * 2.0).abs() < 1e-6,
            "{per_token}"
        );
        assert!(
            m.min_decode_bytes_per_token(600) < f64::from(u32::try_from(m.bytes).unwrap()) * 1.2
        );
    }
}
