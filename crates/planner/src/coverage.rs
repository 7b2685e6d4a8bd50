//! Whether the public rows behind the accuracy bands hold measurements of a
//! plan's setup.
//!
//! The bands ([`crate::accuracy`]) say how far held-out public rows were
//! from their predictions. They are read per GPU or hardware class, so a
//! plan for a setup no public row resembles (another GPU vendor, an engine
//! whose kernels no row ran, a weight format no row used, a parallel split
//! no row measured) still gets a band, from other setups. On such setups
//! the sealed holdouts were far further off than the bands (docs/planner.md,
//! "Sealed holdouts"), so a plan names what the rows do not cover.

use serde::Serialize;

use crate::engine::Engine;
use crate::hardware::{Hardware, HardwareCatalogue};
use crate::measurements::Measurement;

/// How many public rows share each part of a plan's setup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Public rows in all.
    pub rows: usize,
    /// Rows on the plan's GPU.
    pub gpu: usize,
    /// The GPU's vendor (the first word of its catalogue name) and the rows
    /// on any GPU of that vendor.
    pub vendor: String,
    pub vendor_rows: usize,
    /// Rows from the plan's engine (at its version range), and from any
    /// engine running the same kernels ([`Engine::family`]).
    pub engine: usize,
    pub engine_family: usize,
    /// Rows in the plan's weight format (FP16 and BF16 count as one).
    pub quant: usize,
    /// Rows at the plan's tensor-parallel degree.
    pub tp: usize,
    /// What no row covers, in words; empty when every part has rows.
    pub uncovered: Vec<String>,
}

/// The vendor of `hw`: the first word of its name (`NVIDIA`, `AMD`, `Apple`).
fn vendor(hw: &Hardware) -> String {
    hw.name.split_whitespace().next().unwrap_or("").to_string()
}

/// A weight format as coverage compares it.
fn quant_class(q: &str) -> String {
    let q = q.to_ascii_lowercase();
    if q == "bf16" { "fp16".into() } else { q }
}

/// The coverage of `gpu` × `engine` × `quant` at `tp` by `rows`, whose
/// GPUs are looked up in `catalogue` for their vendor.
pub fn of(
    rows: &[Measurement],
    catalogue: &HardwareCatalogue,
    gpu: &Hardware,
    engine: Engine,
    quant: &str,
    tp: u32,
) -> Coverage {
    let vendor = vendor(gpu);
    let row_vendor = |m: &Measurement| catalogue.get(&m.gpu).map(self::vendor).unwrap_or_default();
    let count = |f: &dyn Fn(&Measurement) -> bool| rows.iter().filter(|m| f(m)).count();
    let quant_class = quant_class(quant);
    let c = Coverage {
        rows: rows.len(),
        gpu: count(&|m| m.gpu.eq_ignore_ascii_case(&gpu.id)),
        vendor_rows: count(&|m| row_vendor(m).eq_ignore_ascii_case(&vendor)),
        vendor,
        engine: count(&|m| m.engine == engine),
        engine_family: count(&|m| m.engine.family() == engine.family()),
        quant: count(&|m| self::quant_class(&m.quant) == quant_class),
        tp: count(&|m| m.tp == tp),
        uncovered: Vec::new(),
    };
    let mut uncovered = Vec::new();
    if c.vendor_rows == 0 {
        uncovered.push(format!("no row on any {} GPU", c.vendor));
    } else if c.gpu == 0 {
        uncovered.push(format!("no row on the {}", gpu.id));
    }
    if c.engine_family == 0 {
        uncovered.push(format!(
            "no row from {} or an engine of its kernels",
            engine.as_str()
        ));
    } else if c.engine == 0 {
        // The engines (or versions of this one) whose rows stand in.
        let mut kin: Vec<&str> = rows
            .iter()
            .filter(|m| m.engine.family() == engine.family())
            .map(|m| m.engine.as_str())
            .collect();
        kin.sort_unstable();
        kin.dedup();
        uncovered.push(format!(
            "no row from {} itself (rows from {} stand in)",
            engine.as_str(),
            kin.join(", ")
        ));
    }
    if c.quant == 0 {
        uncovered.push(format!("no row in {quant}"));
    }
    if c.tp == 0 {
        uncovered.push(format!("no row at tp {tp}"));
    }
    Coverage { uncovered, ..c }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::measurements::all_public;

    fn coverage(gpu: &str, engine: &str, quant: &str, tp: u32) -> Coverage {
        let hw = HardwareCatalogue::builtin().unwrap();
        let rows = all_public().unwrap();
        let engine = Engine::parse(engine).unwrap();
        of(&rows, &hw, hw.get(gpu).unwrap(), engine, quant, tp)
    }

    #[test]
    fn a_setup_the_public_rows_measured_is_covered() {
        let c = coverage("h100-sxm", "vllm", "bf16", 1);
        assert!(c.uncovered.is_empty(), "{c:?}");
        assert!(
            c.gpu > 0 && c.engine > 0 && c.quant > 0 && c.tp > 0,
            "{c:?}"
        );
        assert!(c.gpu <= c.vendor_rows && c.vendor_rows <= c.rows, "{c:?}");
        assert_eq!(c.vendor, "NVIDIA");
    }

    #[test]
    fn an_unmeasured_vendor_engine_and_split_are_named() {
        // No public row is on an AMD GPU (the sealed MI300X files are not
        // public rows).
        let c = coverage("mi300x", "vllm", "fp8", 8);
        assert_eq!((c.vendor.as_str(), c.vendor_rows, c.gpu), ("AMD", 0, 0));
        assert!(c.uncovered[0].contains("any AMD GPU"), "{c:?}");
        // NeMo's export has no rows of its own; TensorRT-LLM's stand in.
        let c = coverage("a100-sxm-80gb", "nemo", "fp16", 1);
        assert_eq!(c.engine, 0);
        assert!(c.engine_family > 0);
        assert!(
            c.uncovered
                .iter()
                .any(|u| u.contains("nemo itself") && u.contains("trt-llm")),
            "{c:?}"
        );
        // Today's llama.cpp (flash attention) has no rows; the rows of the
        // builds before it stand in, and the plan names them.
        let c = coverage("rtx-4090", "llama.cpp", "q4_k_m", 1);
        assert!(
            c.uncovered
                .iter()
                .any(|u| u.contains("llama.cpp itself") && u.contains("llama.cpp@b6326")),
            "{c:?}"
        );
    }
}
