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

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use crate::error::PlannerError;
use crate::model::{Mla, ModelSpec, Moe, validate_spec};
use crate::quant::Quant;

const MAGIC: &[u8; 4] = b"GGUF";
const MAX_KV: u64 = 1 << 20;
const MAX_TENSORS: u64 = 1 << 20;
const MAX_STRING: u64 = 16 << 20;
const MAX_ARRAY: u64 = 1 << 26;
const MAX_DIMS: u32 = 8;
/// Strings longer than this are kept as their length only (chat templates,
/// merges); nothing the planner needs is that long.
const KEEP_STRING: u64 = 4096;

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
fn block_size(t: u32) -> Option<(u128, u128)> {
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
            source: self.origin.clone(),
            measured_params: Some(self.params()),
        };
        validate_spec(&spec, &self.origin)?;
        Ok(spec)
    }
}

/// Reads the header of a GGUF file.
pub fn read_file(path: &Path) -> Result<GgufInfo, PlannerError> {
    let io = |source| PlannerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    read(BufReader::new(file), len, &path.display().to_string())
}

/// Reads a GGUF header from any reader of a stream of `len` bytes.
pub fn read<R: Read>(reader: R, len: u64, origin: &str) -> Result<GgufInfo, PlannerError> {
    let mut c = Cursor {
        r: reader,
        pos: 0,
        len,
        origin,
    };
    let mut magic = [0u8; 4];
    c.fill(&mut magic)?;
    if &magic != MAGIC {
        return Err(c.err(format!("not a gguf file (magic {magic:02x?})")));
    }
    let version = c.u32()?;
    if !(2..=3).contains(&version) {
        return Err(c.err(format!(
            "unsupported gguf version {version} (2 or 3 supported)"
        )));
    }
    let n_tensors = c.u64()?;
    let n_kv = c.u64()?;
    if n_tensors > MAX_TENSORS || n_kv > MAX_KV {
        return Err(c.err(format!(
            "{n_tensors} tensors / {n_kv} metadata keys is more than the {MAX_TENSORS} / {MAX_KV} allowed"
        )));
    }
    let mut metadata = BTreeMap::new();
    for _ in 0..n_kv {
        let key = c.string()?;
        let ty = c.u32()?;
        let value = c.value(ty, true)?;
        metadata.insert(key, value);
    }
    // Each tensor info is at least 24 bytes: never reserve beyond the file.
    let mut tensors =
        Vec::with_capacity(usize::try_from(n_tensors.min(c.remaining() / 24)).unwrap_or(0));
    for _ in 0..n_tensors {
        let name = c.string()?;
        let n_dims = c.u32()?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(c.err(format!(
                "tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS})"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        let mut elems: u128 = 1;
        for _ in 0..n_dims {
            let d = c.u64()?;
            elems = elems.saturating_mul(u128::from(d));
            dims.push(d);
        }
        if elems > 1 << 48 {
            return Err(c.err(format!("tensor `{name}` claims {elems} elements")));
        }
        let ggml_type = c.u32()?;
        if block_size(ggml_type).is_none() {
            return Err(c.err(format!("tensor `{name}` has unknown ggml type {ggml_type}")));
        }
        let _offset = c.u64()?;
        tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
        });
    }
    Ok(GgufInfo {
        origin: origin.to_string(),
        version,
        metadata,
        tensors,
    })
}

struct Cursor<'a, R> {
    r: R,
    pos: u64,
    len: u64,
    origin: &'a str,
}

impl<R: Read> Cursor<'_, R> {
    fn err(&self, message: String) -> PlannerError {
        PlannerError::Gguf {
            origin: self.origin.to_string(),
            offset: self.pos,
            message,
        }
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<(), PlannerError> {
        if buf.len() as u64 > self.remaining() {
            return Err(self.err(format!(
                "truncated: need {} bytes, {} left",
                buf.len(),
                self.remaining()
            )));
        }
        self.r
            .read_exact(buf)
            .map_err(|e| self.err(format!("read failed: {e}")))?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn skip(&mut self, n: u64) -> Result<(), PlannerError> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "truncated: need {n} bytes, {} left",
                self.remaining()
            )));
        }
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
            .map_err(|e| self.err(format!("read failed: {e}")))?;
        if copied != n {
            return Err(self.err("truncated while skipping".into()));
        }
        self.pos += n;
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, PlannerError> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    fn u16(&mut self) -> Result<u16, PlannerError> {
        let mut b = [0u8; 2];
        self.fill(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32, PlannerError> {
        let mut b = [0u8; 4];
        self.fill(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, PlannerError> {
        let mut b = [0u8; 8];
        self.fill(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn string_len(&mut self) -> Result<u64, PlannerError> {
        let n = self.u64()?;
        if n > MAX_STRING || n > self.remaining() {
            return Err(self.err(format!(
                "string of {n} bytes (limit {MAX_STRING}, {} left in file)",
                self.remaining()
            )));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<String, PlannerError> {
        let n = self.string_len()?;
        let mut buf = vec![0u8; n as usize];
        self.fill(&mut buf)?;
        String::from_utf8(buf).map_err(|_| self.err("string is not utf-8".into()))
    }

    fn value(&mut self, ty: u32, top: bool) -> Result<MetaValue, PlannerError> {
        Ok(match ty {
            0 => MetaValue::Uint(u64::from(self.u8()?)),
            1 => MetaValue::Int(i64::from(self.u8()? as i8)),
            2 => MetaValue::Uint(u64::from(self.u16()?)),
            3 => MetaValue::Int(i64::from(self.u16()? as i16)),
            4 => MetaValue::Uint(u64::from(self.u32()?)),
            5 => MetaValue::Int(i64::from(self.u32()? as i32)),
            6 => MetaValue::Float(f64::from(f32::from_bits(self.u32()?))),
            7 => MetaValue::Bool(self.u8()? != 0),
            8 => {
                let n = self.string_len()?;
                if n <= KEEP_STRING {
                    let mut buf = vec![0u8; n as usize];
                    self.fill(&mut buf)?;
                    MetaValue::Str(String::from_utf8_lossy(&buf).into_owned())
                } else {
                    self.skip(n)?;
                    MetaValue::LongStr(n)
                }
            }
            9 if top => {
                let elem_type = self.u32()?;
                let len = self.u64()?;
                if elem_type == 9 {
                    return Err(self.err("nested arrays are not supported".into()));
                }
                if len > MAX_ARRAY || len > self.remaining() {
                    return Err(self.err(format!(
                        "array of {len} elements (limit {MAX_ARRAY}, {} bytes left)",
                        self.remaining()
                    )));
                }
                match fixed_size(elem_type) {
                    Some(sz) => self.skip(len.saturating_mul(sz))?,
                    None if elem_type == 8 => {
                        for _ in 0..len {
                            let n = self.string_len()?;
                            self.skip(n)?;
                        }
                    }
                    None => return Err(self.err(format!("unknown array element type {elem_type}"))),
                }
                MetaValue::Array { elem_type, len }
            }
            9 => return Err(self.err("nested arrays are not supported".into())),
            10 => MetaValue::Uint(self.u64()?),
            11 => MetaValue::Int(self.u64()? as i64),
            12 => MetaValue::Float(f64::from_bits(self.u64()?)),
            other => return Err(self.err(format!("unknown metadata value type {other}"))),
        })
    }
}

fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(out: &mut Vec<u8>, v: &str) {
        out.extend((v.len() as u64).to_le_bytes());
        out.extend(v.as_bytes());
    }

    fn kv_u32(out: &mut Vec<u8>, k: &str, v: u32) {
        s(out, k);
        out.extend(4u32.to_le_bytes());
        out.extend(v.to_le_bytes());
    }

    /// A tiny llama-shaped header: 2 layers, hidden 64, vocab 100.
    pub(crate) fn tiny() -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(2u64.to_le_bytes()); // tensors
        b.extend(7u64.to_le_bytes()); // kvs
        s(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "llama");
        kv_u32(&mut b, "llama.block_count", 2);
        kv_u32(&mut b, "llama.embedding_length", 64);
        kv_u32(&mut b, "llama.attention.head_count", 4);
        kv_u32(&mut b, "llama.feed_forward_length", 128);
        kv_u32(&mut b, "general.file_type", 2);
        s(&mut b, "tokenizer.ggml.tokens");
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(100u64.to_le_bytes());
        for i in 0..100 {
            s(&mut b, &format!("t{i}"));
        }
        for (name, ty) in [("token_embd.weight", 2u32), ("blk.0.attn_q.weight", 0u32)] {
            s(&mut b, name);
            b.extend(2u32.to_le_bytes());
            b.extend(64u64.to_le_bytes());
            b.extend(100u64.to_le_bytes());
            b.extend(ty.to_le_bytes());
            b.extend(0u64.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_a_tiny_header() {
        let b = tiny();
        let info = read(&b[..], b.len() as u64, "tiny.gguf").unwrap();
        assert_eq!(info.architecture(), Some("llama"));
        assert_eq!(info.tensors.len(), 2);
        assert_eq!(info.params(), 12800.0);
        // 6400 Q4_0 weights = 200 blocks × 18 B, plus 6400 F32 weights × 4 B.
        assert_eq!(info.tensor_bytes(), 3600.0 + 25600.0);
        let spec = info.to_spec().unwrap();
        assert_eq!(
            (spec.layers, spec.hidden, spec.vocab, spec.head_dim),
            (2, 64, 100, 16)
        );
        assert!(spec.tied_embeddings);
        assert!(info.quant().name.contains("Q4_0"));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let b = tiny();
        for cut in 0..b.len() {
            assert!(read(&b[..cut], cut as u64, "t").is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn hostile_lengths_fail_without_allocating() {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(1u64.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes()); // key length
        let e = read(&b[..], b.len() as u64, "h").unwrap_err();
        assert_eq!(e.code(), "planner.gguf");
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        assert!(
            read(&b[..], b.len() as u64, "h")
                .unwrap_err()
                .to_string()
                .contains("allowed")
        );
        let mut b = b"GGUF".to_vec();
        b.extend(1u32.to_le_bytes());
        assert!(
            read(&b[..], b.len() as u64, "h")
                .unwrap_err()
                .to_string()
                .contains("version")
        );
    }
}
