//! How many token columns an MoE prompt's expert GEMMs compute where each
//! expert's tokens fill whole tiles ([`crate::Engine::moe_prompt_tile`]):
//! a micro-batch's tokens are grouped by expert and every expert that got
//! any computes whole tiles, so an expert with a few tokens of a wide tile
//! computes the tile ([`crate::Scenario::expert_tile_flops`] adds that work
//! to a prompt's FLOPs).

use crate::model::ModelSpec;

/// Token columns of one tile for a micro-batch of `tokens` tokens: the
/// widest the kernel takes (`tile`), narrowed to the micro-batch rounded up
/// to 8 (MMQ's widths come in steps of 8 and the fewest tiles win).
pub fn tile_width(tokens: f64, tile: f64) -> f64 {
    tile.min((tokens / 8.0).ceil() * 8.0).max(1.0)
}

impl ModelSpec {
    /// Expert GEMM work a micro-batch of `tokens` prompt tokens does per
    /// unit of useful work, where each routed expert's tokens are computed
    /// in whole tiles of token columns as wide as the micro-batch allows, at
    /// most `tile` ([`crate::Engine::moe_prompt_tile`]): with uniform routing
    /// an expert gets `X ~ Binomial(u, k/E)` of the `u` tokens and computes
    /// `⌈X/w⌉·w` columns, `w = min(tile, u rounded up to 8)`, so the factor
    /// is `E·w·E[⌈X/w⌉] / (u·k)`. 1 for a dense model and for one token.
    /// Qwen3-30B-A3B (128 experts, 8 a token) at 512 tokens: 4; Mixtral
    /// (8, 2): ~1.5, half its experts spilling into a second tile.
    pub fn expert_tile_padding(&self, tokens: f64, tile: f64) -> f64 {
        let Some(m) = self.moe.as_ref().filter(|m| m.experts > 0 && m.active > 0) else {
            return 1.0;
        };
        let u = tokens.round().max(1.0);
        if u <= 1.0 {
            return 1.0;
        }
        let e = f64::from(m.experts);
        let k = f64::from(m.active).min(e);
        let p = k / e;
        let width = tile_width(u, tile);
        if p >= 1.0 {
            return width * (u / width).ceil() / u;
        }
        // E[⌈X/w⌉] over the binomial's terms, in logs (the first term
        // underflows for large u·p).
        let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
        let n = u as u64;
        let mut ln_term = u * ln_q;
        let mut tiles = 0.0;
        for x in 0..=n {
            if x > 0 {
                let xf = x as f64;
                ln_term += (u - xf + 1.0).ln() - xf.ln() + ln_p - ln_q;
            }
            tiles += ln_term.exp() * (x as f64 / width).ceil();
        }
        e * width * tiles / (u * k)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::ModelCatalogue;

    #[test]
    fn expert_tiles_pad_a_micro_batch_by_its_tokens_per_expert() {
        let c = ModelCatalogue::builtin().unwrap();
        let pad = |model: &str, tokens: f64, tile: f64| {
            c.get(model).unwrap().expert_tile_padding(tokens, tile)
        };
        // DeepSeek-V3: 512 × 8 / 256 = 16 tokens an expert, nearly every
        // expert reached, each computing one 128-column tile: 8×.
        assert!((pad("deepseek-v3", 512.0, 128.0) - 8.0).abs() < 0.05);
        // gpt-oss-20b: 64 an expert (32 experts, 4 a token): 2×.
        assert!((pad("gpt-oss-20b", 512.0, 128.0) - 2.0).abs() < 0.05);
        // Qwen3-30B-A3B: 32 an expert: ~4×; in Metal's 32-token tiles the
        // binomial spread alone: between 1 and 2×.
        let q3 = pad("qwen3-30b-a3b", 512.0, 128.0);
        assert!((3.9..4.1).contains(&q3), "{q3}");
        let metal = pad("qwen3-30b-a3b", 512.0, 32.0);
        assert!((1.2..2.0).contains(&metal), "{metal}");
        // Mixtral: 128 an expert on average, so about half the experts spill
        // into a second tile.
        let mixtral = pad("mixtral-8x7b", 512.0, 128.0);
        assert!((1.3..1.7).contains(&mixtral), "{mixtral}");
        // The tile narrows to a short micro-batch (16 tokens: 16 columns),
        // but each of the ~102 experts reached computes a whole one for its
        // one or two tokens: 256 × 16 × P(X ≥ 1) / (16 × 8) ≈ 12.7.
        let short = pad("deepseek-v3", 16.0, 128.0);
        assert_eq!(short, pad("deepseek-v3", 16.0, 16.0));
        assert!((12.0..13.5).contains(&short), "{short}");
        // Dense models and single tokens are not padded.
        assert_eq!(pad("llama-3.1-8b", 512.0, 128.0), 1.0);
        assert_eq!(pad("gpt-oss-20b", 1.0, 128.0), 1.0);
        // The expectation is a probability-weighted sum: never below 1.
        for tokens in [2.0, 7.0, 100.0, 333.0, 512.0] {
            for model in ["gpt-oss-120b", "mixtral-8x22b", "qwen3-235b-a22b"] {
                let f = pad(model, tokens, 128.0);
                assert!(f.is_finite() && f >= 0.999, "{model} {tokens}: {f}");
            }
        }
    }
}
