//! Layers that attend over a window of recent tokens only.
//!
//! Gemma 2 and 3, gpt-oss and Cohere 2 mix sliding-window layers with
//! full-attention ones; Llama 4 splits the sequence into chunks in three of
//! every four layers. Either way a token in such a layer reads at most
//! `window` keys, so its attention FLOPs and KV reads stop growing with the
//! context. That is the model's arithmetic: every engine that computes the
//! model correctly masks the rest. What an engine *stores* differs: engines
//! with a windowed cache (vLLM's hybrid KV cache manager, llama.cpp's SWA
//! cache, TensorRT-LLM's cyclic cache, SGLang's SWA pool) hold the window,
//! the others hold every token ([`crate::Engine::windowed_kv_cache`]).

use serde::{Deserialize, Serialize};

/// How many layers attend over a window, and how wide it is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindow {
    /// Keys a token in a windowed layer attends over (Gemma 3: 1024,
    /// gpt-oss: 128, Llama 4's attention chunks: 8192).
    pub window: u64,
    /// Layers with the window; the rest attend over the whole context.
    pub layers: u64,
}

impl SlidingWindow {
    /// A window on every layer but each `period`-th of `layers` (Gemma 3:
    /// five windowed layers, then a full one, period 6; Gemma 2 and gpt-oss
    /// alternate, period 2); `None` without a window or a period.
    pub fn interleaved(window: u64, layers: u64, period: u64) -> Option<Self> {
        if window == 0 || period == 0 {
            return None;
        }
        let local = layers - layers / period;
        (local > 0).then_some(Self {
            window,
            layers: local,
        })
    }

    /// The full-attention period llama.cpp gives an architecture whose GGUF
    /// names a window (`{arch}.attention.sliding_window`): every second
    /// layer is full in Gemma 2 and gpt-oss, every fourth in Cohere 2, every
    /// sixth in Gemma 3.
    pub fn gguf_period(arch: &str) -> Option<u64> {
        match arch {
            "gemma2" | "gpt-oss" => Some(2),
            "cohere2" => Some(4),
            "gemma3" => Some(6),
            _ => None,
        }
    }

    /// Windowed and full layers out of `layers`, as floats.
    fn split(&self, layers: u64) -> (f64, f64) {
        let local = self.layers.min(layers) as f64;
        (local, layers as f64 - local)
    }

    /// Mean over the model's `layers` of the keys a token at position `ctx`
    /// attends over (and the KV tokens a layer holds for it):
    /// `(full · ctx + windowed · min(ctx, window)) / layers`.
    pub fn mean_keys(&self, layers: u64, ctx: f64) -> f64 {
        let (local, full) = self.split(layers);
        let w = self.window as f64;
        (full * ctx + local * ctx.min(w)) / (layers.max(1) as f64)
    }

    /// Mean over layers and over `tokens` new tokens after `past` cached ones
    /// of the keys each attends over under a causal mask. A full layer's mean
    /// is `past + (tokens + 1) / 2`; a windowed layer's is the mean of
    /// `min(past + i, window)` for `i = 1..=tokens`.
    pub fn mean_causal_keys(&self, layers: u64, tokens: f64, past: f64) -> f64 {
        let (local, full) = self.split(layers);
        let n = tokens.max(1.0);
        let full_mean = past + (n + 1.0) / 2.0;
        let local_mean = windowed_causal_mean(self.window as f64, n, past);
        (full * full_mean + local * local_mean) / (layers.max(1) as f64)
    }
}

/// Mean of `min(past + i, w)` over `i = 1..=n`.
fn windowed_causal_mean(w: f64, n: f64, past: f64) -> f64 {
    if past >= w {
        return w;
    }
    // The first `m` tokens see `past + i` keys, the rest see the window.
    let m = (w - past).min(n);
    let below = m * past + m * (m + 1.0) / 2.0;
    (below + (n - m) * w) / n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_contexts_see_every_key_and_long_ones_the_window() {
        // Gemma 3 27B: 52 windowed layers of 62, window 1024.
        let w = SlidingWindow {
            window: 1024,
            layers: 52,
        };
        assert_eq!(w.mean_keys(62, 500.0), 500.0);
        let long = w.mean_keys(62, 131_072.0);
        assert!((long - (10.0 * 131_072.0 + 52.0 * 1024.0) / 62.0).abs() < 1e-6);
        // Over a sixth of the full cache, not all of it.
        assert!(long / 131_072.0 < 0.17, "{long}");
    }

    #[test]
    fn causal_mean_matches_a_sum_over_positions() {
        let w = SlidingWindow {
            window: 128,
            layers: 18,
        };
        for (n, past) in [
            (1.0, 0.0),
            (100.0, 0.0),
            (500.0, 0.0),
            (64.0, 100.0),
            (10.0, 4000.0),
        ] {
            let exact: f64 = (1..=n as u64)
                .map(|i| {
                    let ctx = past + i as f64;
                    (18.0 * ctx + 18.0 * ctx.min(128.0)) / 36.0
                })
                .sum::<f64>()
                / n;
            let got = w.mean_causal_keys(36, n, past);
            assert!(
                (got - exact).abs() < 1e-9,
                "n {n} past {past}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn interleaved_patterns_count_the_full_layers() {
        // Gemma 3 4B: 34 layers, full at 6, 12, ..., 30 → 29 windowed.
        assert_eq!(SlidingWindow::interleaved(1024, 34, 6).unwrap().layers, 29);
        // gpt-oss-120b: 36 layers alternating.
        assert_eq!(SlidingWindow::interleaved(128, 36, 2).unwrap().layers, 18);
        assert_eq!(SlidingWindow::interleaved(0, 36, 2), None);
        assert_eq!(SlidingWindow::interleaved(128, 36, 0), None);
        // A period of one: every layer full.
        assert_eq!(SlidingWindow::interleaved(128, 36, 1), None);
    }

    #[test]
    fn more_windowed_layers_than_layers_are_capped() {
        let w = SlidingWindow {
            window: 10,
            layers: 99,
        };
        assert_eq!(w.mean_keys(4, 1000.0), 10.0);
    }
}
