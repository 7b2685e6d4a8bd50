//! Capability: how strong a worker's hardware is for generation, and the
//! weight placement gives it per node kind (the seed's rule: embeddings to
//! mid-range cards with memory, the LLM to the strongest card). Kept apart
//! from [`placement`](crate::placement) so that file stays about choosing.

use crate::member::Hardware;

const GIB: f64 = (1u64 << 30) as f64;

/// A GPU's compute capability as a number (`8.9`); 5.0 when unknown.
fn compute(cc: Option<&str>) -> f64 {
    cc.and_then(|c| c.trim().parse::<f64>().ok())
        .filter(|c| c.is_finite() && *c > 0.0)
        .unwrap_or(5.0)
}

/// How strong a machine is for generation: Σ GPU memory GiB × compute
/// capability; a CPU-only machine 0.05 per core.
pub fn strength(hw: &Hardware) -> f64 {
    if hw.gpus.is_empty() {
        return 0.05 * f64::from(hw.cpu_cores.max(1));
    }
    hw.gpus
        .iter()
        .map(|g| g.memory_bytes as f64 / GIB * compute(g.compute_capability.as_deref()))
        .sum()
}

/// The capability weight of `hw` for `kind`, given the strength of the
/// strongest eligible candidate (see the module docs).
pub fn weight(kind: &str, hw: &Hardware, top_strength: f64) -> f64 {
    if kind == "embedding" && !hw.gpus.is_empty() {
        let memory: f64 = hw.gpus.iter().map(|g| g.memory_bytes as f64 / GIB).sum();
        let s = if top_strength > 0.0 {
            (strength(hw) / top_strength).min(1.0)
        } else {
            1.0
        };
        memory * (1.0 - 0.75 * s * s)
    } else {
        strength(hw)
    }
}

/// Extra wait for a nearly full KV cache.
pub(crate) fn kv_factor(kv_usage: f64) -> f64 {
    let kv = if kv_usage.is_finite() { kv_usage } else { 0.0 };
    1.0 + 20.0 * (kv - 0.8).max(0.0)
}
