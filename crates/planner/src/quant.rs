//! Weight formats and their real bits per weight.
//!
//! GGUF block formats carry scales inside each block, so Q4_0 is 4.5 bits per
//! weight, not 4 (18 bytes per 32 weights). K-quant mixes (`Q4_K_M`) use
//! different types for different tensors; their figures are the averages
//! llama.cpp reports for Llama-class models. A GGUF file read from disk uses its
//! own measured bits per weight instead (see [`crate::gguf`]).

use serde::{Deserialize, Serialize};

use crate::error::{PlannerError, did_you_mean};

/// Which peak rate of the hardware a format computes at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeDtype {
    Fp32,
    Fp16,
    Fp8,
    Int8,
    /// NVFP4 weights and activations on tensor cores that have FP4 (Blackwell);
    /// elsewhere weight-only: the weights are widened in registers and the
    /// matmul runs on BF16 tensor cores (Marlin's W4A16 NVFP4 kernels on
    /// Hopper, NVIDIA/TensorRT-LLM#13476).
    Fp4,
    /// MXFP4 weights (gpt-oss's experts). Where the device has FP4 tensor
    /// cores, vLLM's FlashInfer path quantises the activations to MXFP8 and
    /// the mixed FP4 × FP8 matmul runs at the FP8 rate (huggingface/
    /// transformers#40904 describes both paths); elsewhere, and in
    /// triton_kernels' `matmul_ogs`, the activations stay BF16 and the
    /// weights are widened: the FP16 rate (vLLM's Marlin MXFP4 and its BF16 ×
    /// MXFP4 CUTLASS MoE for Hopper, vllm-project/vllm#23369).
    Mxfp4,
}

/// A weight format: a name, bits per weight and the compute rate it uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Quant {
    pub name: String,
    pub bits_per_weight: f64,
    pub compute: ComputeDtype,
    /// The format covers only an MoE model's routed experts; the other
    /// weights stay BF16 ([`crate::weights`]: MXFP4 checkpoints such as
    /// gpt-oss). A dense model in it is covered whole.
    #[serde(default)]
    pub experts_only: bool,
}

/// (name, bits per weight, compute dtype, note). Weight-only formats (int4,
/// GGUF) dequantise to FP16 for the matmul, so they compute at the FP16 rate.
const TABLE: &[(&str, f64, ComputeDtype)] = &[
    ("fp32", 32.0, ComputeDtype::Fp32),
    ("fp16", 16.0, ComputeDtype::Fp16),
    ("bf16", 16.0, ComputeDtype::Fp16),
    ("fp8", 8.0, ComputeDtype::Fp8),
    ("int8", 8.0, ComputeDtype::Int8),
    // NVFP4: E2M1 values with one FP8 (E4M3) scale per 16 values: 4 + 8/16
    // (the per-tensor FP32 scale is negligible). NVIDIA, "Introducing NVFP4"
    // (developer blog, 2025) and the ModelOpt NVFP4 checkpoint format.
    ("nvfp4", 4.5, ComputeDtype::Fp4),
    // MXFP4 (OCP Microscaling v1.0): E2M1 with one E8M0 scale per 32: 4 + 8/32.
    ("mxfp4", 4.25, ComputeDtype::Mxfp4),
    // AWQ/GPTQ 4-bit, group size 128, FP16 scale + zero per group: 4 + 32/128.
    ("int4", 4.25, ComputeDtype::Fp16),
    ("q2_k", 2.63, ComputeDtype::Fp16),
    ("q3_k_m", 3.91, ComputeDtype::Fp16),
    ("q4_0", 4.5, ComputeDtype::Fp16),
    ("q4_1", 5.0, ComputeDtype::Fp16),
    ("iq4_xs", 4.25, ComputeDtype::Fp16),
    ("q4_k_s", 4.58, ComputeDtype::Fp16),
    ("q4_k_m", 4.85, ComputeDtype::Fp16),
    ("q5_0", 5.5, ComputeDtype::Fp16),
    ("q5_1", 6.0, ComputeDtype::Fp16),
    ("q5_k_s", 5.54, ComputeDtype::Fp16),
    ("q5_k_m", 5.69, ComputeDtype::Fp16),
    ("q6_k", 6.56, ComputeDtype::Fp16),
    ("q8_0", 8.5, ComputeDtype::Fp16),
];

impl Quant {
    /// Parses a format name, case-insensitively (`F16`, `Q4_K_M`, `awq` → int4).
    pub fn parse(name: &str) -> Result<Self, PlannerError> {
        let lower = name.trim().to_ascii_lowercase().replace('-', "_");
        let canonical = match lower.as_str() {
            "f32" | "float32" => "fp32",
            "f16" | "float16" | "half" => "fp16",
            "bfloat16" => "bf16",
            "f8" | "float8" | "fp8_e4m3" => "fp8",
            "w8a8" | "i8" => "int8",
            "awq" | "gptq" | "w4a16" | "i4" => "int4",
            "fp4" | "nv_fp4" | "w4a4_nvfp4" => "nvfp4",
            "mx_fp4" => "mxfp4",
            other => other,
        };
        if let Some(q) = Self::exl2(canonical, name.trim()) {
            return q;
        }
        TABLE
            .iter()
            .find(|(n, _, _)| *n == canonical)
            .map(|(n, bpw, c)| Self {
                name: (*n).to_string(),
                bits_per_weight: *bpw,
                compute: *c,
                experts_only: *n == "mxfp4",
            })
            .ok_or_else(|| PlannerError::UnknownValue {
                what: "quantisation",
                value: name.to_string(),
                suggestion: did_you_mean(&lower, TABLE.iter().map(|(n, _, _)| *n)),
                choices: TABLE
                    .iter()
                    .map(|(n, _, _)| *n)
                    .chain(["exl2-<bits>"])
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// ExLlamaV2's EXL2 (`exl2-4.65`, `EXL2_4.65bpw`): a file is converted
    /// to a target average of bits per weight (`convert.py -b`), mixing bit
    /// widths per layer, and is named by it; the name's figure is the
    /// format's. Weight-only, widened to FP16 for the matmul. `None` when
    /// the name is not EXL2; an EXL2 name without a figure in 2–8 is an error.
    fn exl2(canonical: &str, given: &str) -> Option<Result<Self, PlannerError>> {
        let rest = canonical.strip_prefix("exl2")?;
        let figure = rest.trim_start_matches('_').trim_end_matches("bpw");
        Some(match figure.parse::<f64>() {
            Ok(bits) if (2.0..=8.0).contains(&bits) => Ok(Self {
                name: format!("exl2-{figure}"),
                bits_per_weight: bits,
                compute: ComputeDtype::Fp16,
                experts_only: false,
            }),
            _ => Err(PlannerError::invalid(
                "quantisation",
                format!(
                    "`{given}` is EXL2 without its bits per weight in 2-8; \
                     name it as the file is, e.g. `exl2-4.65`"
                ),
            )),
        })
    }

    /// A format measured from a file (GGUF), computing at FP16 unless it is F32.
    pub fn measured(name: &str, bits_per_weight: f64) -> Self {
        let compute = if bits_per_weight > 24.0 {
            ComputeDtype::Fp32
        } else {
            ComputeDtype::Fp16
        };
        Self {
            name: name.to_string(),
            bits_per_weight,
            compute,
            experts_only: false,
        }
    }

    /// A GGUF block format (`q4_k_m`, `q8_0`, `iq4_xs`, or a file's
    /// `gguf:Q4_K_M`): blocks of small integers with their own scales, which
    /// llama.cpp's kernels dequantise themselves; not F16, BF16 or F32.
    pub fn is_gguf_block_format(&self) -> bool {
        let name = self.name.to_ascii_lowercase();
        let name = name.strip_prefix("gguf:").unwrap_or(&name);
        let rest = name
            .strip_prefix("iq")
            .or_else(|| name.strip_prefix("tq"))
            .or_else(|| name.strip_prefix('q'));
        rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    }

    /// Bytes per weight.
    pub fn bytes_per_weight(&self) -> f64 {
        self.bits_per_weight / 8.0
    }

    /// Every known format name, for help text.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLE.iter().map(|(n, _, _)| *n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_block_formats_are_told_from_float_and_other_formats() {
        for name in ["q4_k_m", "Q8_0", "iq4_xs", "q2_k"] {
            assert!(Quant::parse(name).unwrap().is_gguf_block_format(), "{name}");
        }
        assert!(Quant::measured("gguf:Q4_K_M", 4.9).is_gguf_block_format());
        for name in ["fp16", "bf16", "fp32", "int4", "fp8", "nvfp4", "exl2-4.65"] {
            assert!(
                !Quant::parse(name).unwrap().is_gguf_block_format(),
                "{name}"
            );
        }
        assert!(!Quant::measured("gguf:F16", 16.0).is_gguf_block_format());
    }

    #[test]
    fn gguf_block_formats_include_their_scales() {
        assert_eq!(Quant::parse("Q4_0").unwrap().bits_per_weight, 4.5);
        assert_eq!(Quant::parse("q4_1").unwrap().bits_per_weight, 5.0);
        assert_eq!(Quant::parse("Q8_0").unwrap().bits_per_weight, 8.5);
        assert_eq!(Quant::parse("F16").unwrap().name, "fp16");
        assert_eq!(Quant::parse("awq").unwrap().name, "int4");
    }

    #[test]
    fn nvfp4_counts_its_block_scales_and_computes_in_fp4() {
        let q = Quant::parse("NVFP4").unwrap();
        assert_eq!(q.bits_per_weight, 4.5);
        assert_eq!(q.compute, ComputeDtype::Fp4);
        assert_eq!(Quant::parse("fp4").unwrap().name, "nvfp4");
        assert_eq!(Quant::parse("mxfp4").unwrap().bits_per_weight, 4.25);
    }

    #[test]
    fn exl2_takes_its_bits_per_weight_from_its_name() {
        let q = Quant::parse("EXL2-4.65bpw").unwrap();
        assert_eq!((q.name.as_str(), q.bits_per_weight), ("exl2-4.65", 4.65));
        assert_eq!(q.compute, ComputeDtype::Fp16);
        assert_eq!(Quant::parse("exl2_6.0").unwrap().bits_per_weight, 6.0);
        for bad in ["exl2", "exl2-12", "exl2-fast"] {
            let e = Quant::parse(bad).unwrap_err().to_string();
            assert!(e.contains("exl2-4.65") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_quant_suggests() {
        let e = Quant::parse("q4_k_n").unwrap_err();
        assert!(e.to_string().contains("did you mean `q4_k_m`"), "{e}");
    }
}
