//! A small, defensive GGUF header reader.
//!
//! Reads what planning needs and nothing else: the metadata key/values
//! (architecture shapes) and the tensor table (to count parameters and
//! measure the file's real bits per weight). Tensor data is never read.
//! GGUF versions 2 and 3 are accepted (version 1 used 32-bit lengths).
//!
//! Files are untrusted input: every count and length is checked against a
//! fixed cap *and* against the bytes left in the file before anything is
//! allocated, so a hostile header fails with an error instead of exhausting
//! memory, and no arithmetic on its numbers can overflow or panic.

//!
//! This module holds what a header says ([`GgufInfo`]: metadata, tensor
//! table, and the model shape read from them); the `read` submodule parses
//! the bytes.

mod read;

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::PlannerError;
use crate::model::{Mla, ModelSpec, Moe, validate_spec};
use crate::quant::Quant;
use crate::window::SlidingWindow;

pub use read::{read, read_file};

/// A metadata value. Arrays keep their length and element type, not contents:
/// a tokenizer's 150k tokens are counted, not stored.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    Uint(u64),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    /// A string too long to keep, by length.
    LongStr(u64),
    Array {
        elem_type: u32,
        len: u64,
    },
}

impl MetaValue {
    fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Uint(v) => Some(*v),
            Self::Int(v) => u64::try_from(*v).ok(),
            _ => None,
        }
    }
}

/// One tensor's shape and storage type.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub dims: Vec<u64>,
    pub ggml_type: u32,
}

impl TensorInfo {
    pub fn elements(&self) -> u128 {
        self.dims.iter().map(|d| u128::from(*d)).product()
    }

    /// Storage bytes, from the type's block size.
    pub fn bytes(&self) -> Option<u128> {
        let (block_bytes, block_elems) = block_size(self.ggml_type)?;
        Some(self.elements().div_ceil(block_elems) * block_bytes)
    }
}

/// (bytes per block, elements per block) for ggml tensor types.
pub(crate) fn block_size(t: u32) -> Option<(u128, u128)> {
    Some(match t {
        0 => (4, 1),      // F32
        1 => (2, 1),      // F16
        2 => (18, 32),    // Q4_0
        3 => (20, 32),    // Q4_1
        6 => (22, 32),    // Q5_0
        7 => (24, 32),    // Q5_1
        8 => (34, 32),    // Q8_0
        9 => (36, 32),    // Q8_1
        10 => (84, 256),  // Q2_K
        11 => (110, 256), // Q3_K
        12 => (144, 256), // Q4_K
        13 => (176, 256), // Q5_K
        14 => (210, 256), // Q6_K
        15 => (292, 256), // Q8_K
        16 => (66, 256),  // IQ2_XXS
        17 => (74, 256),  // IQ2_XS
        18 => (98, 256),  // IQ3_XXS
        19 => (50, 256),  // IQ1_S
        20 => (18, 32),   // IQ4_NL
        21 => (110, 256), // IQ3_S
        22 => (82, 256),  // IQ2_S
        23 => (136, 256), // IQ4_XS
        24 => (1, 1),     // I8
        25 => (2, 1),     // I16
        26 => (4, 1),     // I32
        27 => (8, 1),     // I64
        28 => (8, 1),     // F64
        29 => (56, 256),  // IQ1_M
        30 => (2, 1),     // BF16
        34 => (54, 256),  // TQ1_0
        35 => (66, 256),  // TQ2_0
        _ => return None,
    })
}

/// `general.file_type` → the llama.cpp name of the whole-file format.
fn file_type_name(ft: u64) -> Option<&'static str> {
    Some(match ft {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        30 => "IQ4_XS",
        32 => "BF16",
        _ => return None,
    })
}

/// What a GGUF header says.
#[derive(Debug, Clone)]
pub struct GgufInfo {
    pub origin: String,
    pub version: u32,
    pub metadata: BTreeMap<String, MetaValue>,
    pub tensors: Vec<TensorInfo>,
}

impl GgufInfo {
    pub fn architecture(&self) -> Option<&str> {
        match self.metadata.get("general.architecture") {
            Some(MetaValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Parameters: the sum of every tensor's elements.
    pub fn params(&self) -> f64 {
        self.tensors.iter().map(|t| t.elements() as f64).sum()
    }

    /// Bytes of tensor data, from each tensor's type.
    pub fn tensor_bytes(&self) -> f64 {
        self.tensors
            .iter()
            .filter_map(|t| t.bytes())
            .map(|b| b as f64)
            .sum()
    }

    /// The file's real bits per weight (scales and mixed types included).
    pub fn bits_per_weight(&self) -> f64 {
        let p = self.params();
        if p > 0.0 {
            self.tensor_bytes() * 8.0 / p
        } else {
            0.0
        }
    }

    /// The file's weight format, with its measured bits per weight.
    pub fn quant(&self) -> Quant {
        let name = self
            .metadata
            .get("general.file_type")
            .and_then(MetaValue::as_u64)
            .and_then(file_type_name)
            .unwrap_or("gguf");
        Quant::measured(&format!("gguf:{name}"), self.bits_per_weight())
    }

    fn arch_u64(&self, key: &str) -> Option<u64> {
        let arch = self.architecture()?;
        self.metadata
            .get(&format!("{arch}.{key}"))
            .and_then(MetaValue::as_u64)
    }

    /// The model spec, from `{arch}.*` keys plus the tensor table.
    pub fn to_spec(&self) -> Result<ModelSpec, PlannerError> {
        let err = |message: String| PlannerError::Gguf {
            origin: self.origin.clone(),
            offset: 0,
            message,
        };
        let arch = self
            .architecture()
            .ok_or_else(|| err("no `general.architecture` key".into()))?;
        let need = |k: &str| {
            self.arch_u64(k)
                .ok_or_else(|| err(format!("missing key `{arch}.{k}`")))
        };
        let layers = need("block_count")?;
        let hidden = need("embedding_length")?;
        let heads = need("attention.head_count")?;
        let kv_heads = self.arch_u64("attention.head_count_kv").unwrap_or(heads);
        let head_dim = self
            .arch_u64("attention.key_length")
            .unwrap_or(hidden / heads.max(1));
        let ffn = self.arch_u64("feed_forward_length").unwrap_or(4 * hidden);
        let vocab = self
            .arch_u64("vocab_size")
            .or_else(|| match self.metadata.get("tokenizer.ggml.tokens") {
                Some(MetaValue::Array { len, .. }) => Some(*len),
                _ => None,
            })
            .or_else(|| {
                self.tensors
                    .iter()
                    .find(|t| t.name == "token_embd.weight")
                    .and_then(|t| t.dims.get(1).copied())
            })
            .ok_or_else(|| err("cannot tell the vocabulary size".into()))?;
        let moe = match self.arch_u64("expert_count") {
            Some(e) if e > 1 => Some(Moe {
                experts: u32::try_from(e).map_err(|_| err(format!("expert_count {e} too big")))?,
                active: u32::try_from(self.arch_u64("expert_used_count").unwrap_or(2).min(e))
                    .unwrap_or(2),
                shared: self.arch_u64("expert_shared_count").unwrap_or(0).min(1024) as u32,
                expert_ffn: self.arch_u64("expert_feed_forward_length").unwrap_or(ffn),
                dense_layers: self
                    .arch_u64("leading_dense_block_count")
                    .unwrap_or(0)
                    .min(layers) as u32,
            }),
            _ => None,
        };
        let mla = self.arch_u64("attention.kv_lora_rank").map(|rank| {
            let rope = self.arch_u64("rope.dimension_count").unwrap_or(64);
            let v = self.arch_u64("attention.value_length").unwrap_or(128);
            Mla {
                kv_lora_rank: rank,
                qk_rope_head_dim: rope,
                qk_nope_head_dim: head_dim.saturating_sub(rope),
                v_head_dim: v,
                q_lora_rank: self.arch_u64("attention.q_lora_rank"),
            }
        });
        let sliding_window = match (
            self.arch_u64("attention.sliding_window"),
            SlidingWindow::gguf_period(arch),
        ) {
            (Some(window), Some(period)) => SlidingWindow::interleaved(window, layers, period),
            _ => None,
        };
        let tied = !self.tensors.iter().any(|t| t.name == "output.weight");
        let name = match self.metadata.get("general.name") {
            Some(MetaValue::Str(s)) => s.clone(),
            _ => arch.to_string(),
        };
        let id = Path::new(&self.origin)
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| name.clone());
        let spec = ModelSpec {
            id,
            name,
            aliases: vec![],
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim,
            ffn,
            vocab,
            tied_embeddings: tied,
            context: self.arch_u64("context_length"),
            params_b: None,
            moe,
            mla,
            native_quant: None,
            fp8_block: false,
            sliding_window,
            source: self.origin.clone(),
            measured_params: Some(self.params()),
        };
        validate_spec(&spec, &self.origin)?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests;
