//! Converts a BERT-family sentence-transformers model (`config.json`,
//! `tokenizer.json`, `model.safetensors`) into a GGUF file that llama.cpp's
//! `bert` architecture loads.
//!
//! The conversion is a re-layout, not a change of numbers: every tensor keeps
//! its `f32` values (an `f16` or `bf16` source is widened), names follow
//! llama.cpp's (`token_embd`, `blk.N.attn_q`, ...), and the vocabulary is
//! written so llama.cpp accepts the token ids we feed it (we tokenize with the
//! model's own `tokenizer.json`, exactly as sentence-transformers does).
//! The file is written beside the weights, once, under a temporary name and
//! renamed into place; a newer `model.safetensors` makes it stale.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors};

use super::EmbedError;

/// The converted file's name, beside `model.safetensors`.
pub const GGUF_FILE: &str = "model.gguf";
/// Bumped whenever the conversion changes; stored in the file, and a file
/// with another value is rebuilt.
const CONVERTER_VERSION: u32 = 1;
const ALIGN: usize = 32;

/// The GGUF for the model in `dir`: converted now if missing or stale.
pub fn ensure_gguf(dir: &Path) -> Result<PathBuf, EmbedError> {
    let out = dir.join(GGUF_FILE);
    let weights = dir.join("model.safetensors");
    if is_current(&out, &weights) {
        return Ok(out);
    }
    convert(dir, &out)?;
    Ok(out)
}

fn is_current(gguf: &Path, weights: &Path) -> bool {
    let (Ok(g), Ok(w)) = (std::fs::metadata(gguf), std::fs::metadata(weights)) else {
        return false;
    };
    let newer = match (g.modified(), w.modified()) {
        (Ok(g), Ok(w)) => g >= w,
        _ => false,
    };
    newer && stored_converter_version(gguf) == Some(CONVERTER_VERSION)
}

/// Reads `glassbox.converter_version`, written as the first key-value pair.
fn stored_converter_version(path: &Path) -> Option<u32> {
    use std::io::Read;
    let mut head = [0u8; 128];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let head = &head[..n];
    let key = b"glassbox.converter_version";
    // magic(4) version(4) tensors(8) kvs(8) key_len(8) key type(4) value(4)
    let start = 24 + 8;
    if head.get(..4)? != b"GGUF" || head.get(start..start + key.len())? != key {
        return None;
    }
    let at = start + key.len() + 4;
    Some(u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?))
}

struct Config {
    hidden: u64,
    layers: u64,
    heads: u64,
    intermediate: u64,
    max_positions: u64,
    type_vocab: u64,
    eps: f32,
}

fn config(dir: &Path) -> Result<Config, EmbedError> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|source| EmbedError::Io {
        path: path.clone(),
        source,
    })?;
    let bad = |detail: String| EmbedError::Config {
        path: path.clone(),
        detail,
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let get = |key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| bad(format!("no whole number `{key}`")))
    };
    let kind = v.get("model_type").and_then(|m| m.as_str()).unwrap_or("bert");
    if kind != "bert" {
        return Err(bad(format!(
            "`model_type` is `{kind}`; only BERT models are supported"
        )));
    }
    Ok(Config {
        hidden: get("hidden_size")?,
        layers: get("num_hidden_layers")?,
        heads: get("num_attention_heads")?,
        intermediate: get("intermediate_size")?,
        max_positions: get("max_position_embeddings")?,
        type_vocab: get("type_vocab_size").unwrap_or(2),
        eps: v
            .get("layer_norm_eps")
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(1e-12) as f32,
    })
}

/// The vocabulary in id order, from `tokenizer.json`'s WordPiece model.
fn vocab(dir: &Path) -> Result<Vec<String>, EmbedError> {
    let path = dir.join("tokenizer.json");
    let text = std::fs::read_to_string(&path).map_err(|source| EmbedError::Io {
        path: path.clone(),
        source,
    })?;
    let bad = |detail: &str| EmbedError::Tokenizer {
        detail: format!("{}: {detail}", path.display()),
    };
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|_| bad("not JSON"))?;
    let map = v
        .pointer("/model/vocab")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("no `model.vocab` object (not a WordPiece tokenizer)"))?;
    let mut tokens = vec![None; map.len()];
    for (token, id) in map {
        let id = id
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < tokens.len())
            .ok_or_else(|| bad("a token id is out of range"))?;
        tokens[id] = Some(token.clone());
    }
    tokens
        .into_iter()
        .enumerate()
        .map(|(i, t)| t.ok_or_else(|| bad(&format!("no token has id {i}"))))
        .collect()
}

/// llama.cpp's name for a sentence-transformers tensor; `None` to drop it.
fn gguf_name(name: &str) -> Option<String> {
    let name = name.strip_prefix("bert.").unwrap_or(name);
    let fixed = match name {
        "embeddings.word_embeddings.weight" => "token_embd.weight",
        "embeddings.position_embeddings.weight" => "position_embd.weight",
        "embeddings.token_type_embeddings.weight" => "token_types.weight",
        "embeddings.LayerNorm.weight" => "token_embd_norm.weight",
        "embeddings.LayerNorm.bias" => "token_embd_norm.bias",
        _ => "",
    };
    if !fixed.is_empty() {
        return Some(fixed.to_owned());
    }
    let rest = name.strip_prefix("encoder.layer.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: u32 = layer.parse().ok()?;
    let (module, kind) = part.rsplit_once('.')?;
    let target = match module {
        "attention.self.query" => "attn_q",
        "attention.self.key" => "attn_k",
        "attention.self.value" => "attn_v",
        "attention.output.dense" => "attn_output",
        "attention.output.LayerNorm" => "attn_output_norm",
        "intermediate.dense" => "ffn_up",
        "output.dense" => "ffn_down",
        "output.LayerNorm" => "layer_output_norm",
        _ => return None,
    };
    Some(format!("blk.{layer}.{target}.{kind}"))
}

/// A tensor to write: name, ggml dimensions (innermost first), f32 values.
struct Tensor {
    name: String,
    dims: Vec<u64>,
    data: Vec<f32>,
}

fn to_f32(dtype: Dtype, bytes: &[u8]) -> Option<Vec<f32>> {
    let out = match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|b| f32::from_bits(u32::from(u16::from_le_bytes([b[0], b[1]])) << 16))
            .collect(),
        _ => return None,
    };
    Some(out)
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: normalise.
            let shift = f.leading_zeros() - 21;
            sign | ((127 - 15 + 1 - shift) << 23) | ((f << shift) & 0x3ff) << 13
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

fn tensors(dir: &Path) -> Result<Vec<Tensor>, EmbedError> {
    let path = dir.join("model.safetensors");
    let bytes = std::fs::read(&path).map_err(|source| EmbedError::Io {
        path: path.clone(),
        source,
    })?;
    let bad = |detail: String| EmbedError::Weights {
        path: path.clone(),
        detail,
    };
    let st = SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let Some(gguf) = gguf_name(&name) else {
            continue;
        };
        let data = to_f32(view.dtype(), view.data())
            .ok_or_else(|| bad(format!("`{name}` has unsupported type {:?}", view.dtype())))?;
        let dims: Vec<u64> = view.shape().iter().rev().map(|&d| d as u64).collect();
        out.push(Tensor {
            name: gguf,
            dims,
            data,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    if !out.iter().any(|t| t.name == "token_embd.weight") {
        return Err(bad("no `embeddings.word_embeddings.weight`: not a BERT model".into()));
    }
    Ok(out)
}

/// A GGUF metadata value.
enum Value {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
}

fn put_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s.as_bytes())
}

fn put_kv(w: &mut impl Write, key: &str, value: &Value) -> io::Result<()> {
    put_str(w, key)?;
    match value {
        Value::U32(v) => {
            w.write_all(&4u32.to_le_bytes())?;
            w.write_all(&v.to_le_bytes())
        }
        Value::F32(v) => {
            w.write_all(&6u32.to_le_bytes())?;
            w.write_all(&v.to_le_bytes())
        }
        Value::Bool(v) => {
            w.write_all(&7u32.to_le_bytes())?;
            w.write_all(&[u8::from(*v)])
        }
        Value::Str(s) => {
            w.write_all(&8u32.to_le_bytes())?;
            put_str(w, s)
        }
        Value::StrArray(items) => {
            w.write_all(&9u32.to_le_bytes())?;
            w.write_all(&8u32.to_le_bytes())?;
            w.write_all(&(items.len() as u64).to_le_bytes())?;
            items.iter().try_for_each(|s| put_str(w, s))
        }
        Value::I32Array(items) => {
            w.write_all(&9u32.to_le_bytes())?;
            w.write_all(&5u32.to_le_bytes())?;
            w.write_all(&(items.len() as u64).to_le_bytes())?;
            items.iter().try_for_each(|v| w.write_all(&v.to_le_bytes()))
        }
    }
}

fn convert(dir: &Path, out: &Path) -> Result<(), EmbedError> {
    let cfg = config(dir)?;
    let tokens = vocab(dir)?;
    let tensors = tensors(dir)?;
    let id_of = |t: &str, default: u32| {
        tokens
            .iter()
            .position(|x| x == t)
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(default)
    };
    // 3 = control (special) tokens, 1 = normal.
    let types: Vec<i32> = tokens
        .iter()
        .map(|t| {
            if ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"].contains(&t.as_str()) {
                3
            } else {
                1
            }
        })
        .collect();
    let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let kvs: Vec<(&str, Value)> = vec![
        ("glassbox.converter_version", Value::U32(CONVERTER_VERSION)),
        ("general.architecture", Value::Str("bert".into())),
        ("general.name", Value::Str(dir_name(dir))),
        ("general.alignment", Value::U32(ALIGN as u32)),
        ("bert.context_length", Value::U32(u32_of(cfg.max_positions))),
        ("bert.embedding_length", Value::U32(u32_of(cfg.hidden))),
        ("bert.feed_forward_length", Value::U32(u32_of(cfg.intermediate))),
        ("bert.block_count", Value::U32(u32_of(cfg.layers))),
        ("bert.attention.head_count", Value::U32(u32_of(cfg.heads))),
        ("bert.attention.layer_norm_epsilon", Value::F32(cfg.eps)),
        ("bert.attention.causal", Value::Bool(false)),
        // 1 = mean pooling, what sentence-transformers' MiniLM uses.
        ("bert.pooling_type", Value::U32(1)),
        ("tokenizer.ggml.model", Value::Str("bert".into())),
        ("tokenizer.ggml.token_type_count", Value::U32(u32_of(cfg.type_vocab))),
        ("tokenizer.ggml.unknown_token_id", Value::U32(id_of("[UNK]", 100))),
        ("tokenizer.ggml.cls_token_id", Value::U32(id_of("[CLS]", 101))),
        ("tokenizer.ggml.seperator_token_id", Value::U32(id_of("[SEP]", 102))),
        ("tokenizer.ggml.padding_token_id", Value::U32(id_of("[PAD]", 0))),
        ("tokenizer.ggml.mask_token_id", Value::U32(id_of("[MASK]", 103))),
        ("tokenizer.ggml.tokens", Value::StrArray(tokens)),
        ("tokenizer.ggml.token_type", Value::I32Array(types)),
    ];

    let tmp = out.with_extension(format!("gguf.{}.part", std::process::id()));
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EmbedError::Io { path, source }
    };
    let file = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    let mut w = BufWriter::new(file);
    let write = |w: &mut BufWriter<std::fs::File>| -> io::Result<()> {
        w.write_all(b"GGUF")?;
        w.write_all(&3u32.to_le_bytes())?;
        w.write_all(&(tensors.len() as u64).to_le_bytes())?;
        w.write_all(&(kvs.len() as u64).to_le_bytes())?;
        for (k, v) in &kvs {
            put_kv(w, k, v)?;
        }
        let mut offset = 0u64;
        for t in &tensors {
            put_str(w, &t.name)?;
            w.write_all(&(t.dims.len() as u32).to_le_bytes())?;
            for d in &t.dims {
                w.write_all(&d.to_le_bytes())?;
            }
            w.write_all(&0u32.to_le_bytes())?; // GGML_TYPE_F32
            w.write_all(&offset.to_le_bytes())?;
            offset += padded(t.data.len() * 4) as u64;
        }
        pad(w)?;
        for t in &tensors {
            for x in &t.data {
                w.write_all(&x.to_le_bytes())?;
            }
            let len = t.data.len() * 4;
            w.write_all(&vec![0u8; padded(len) - len])?;
        }
        w.flush()
    };
    if let Err(source) = write(&mut w).and_then(|()| w.get_ref().sync_all()) {
        drop(w);
        let _ = std::fs::remove_file(&tmp);
        return Err(EmbedError::Io { path: tmp, source });
    }
    drop(w);
    std::fs::rename(&tmp, out).map_err(io_err(out))
}

fn padded(len: usize) -> usize {
    len.div_ceil(ALIGN) * ALIGN
}

/// Pads the header so the tensor data starts aligned.
fn pad(w: &mut BufWriter<std::fs::File>) -> io::Result<()> {
    // BufWriter does not know the position: ask the file after a flush.
    w.flush()?;
    use std::io::Seek;
    let pos = w.get_mut().stream_position()? as usize;
    w.write_all(&vec![0u8; padded(pos) - pos])
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| "embedder".to_owned(), |n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentence_transformers_names_map_to_llama_cpp_names() {
        let cases = [
            ("embeddings.word_embeddings.weight", Some("token_embd.weight")),
            ("bert.embeddings.LayerNorm.bias", Some("token_embd_norm.bias")),
            (
                "encoder.layer.5.attention.self.query.weight",
                Some("blk.5.attn_q.weight"),
            ),
            (
                "encoder.layer.0.attention.output.LayerNorm.weight",
                Some("blk.0.attn_output_norm.weight"),
            ),
            ("encoder.layer.3.output.dense.bias", Some("blk.3.ffn_down.bias")),
            ("encoder.layer.3.intermediate.dense.weight", Some("blk.3.ffn_up.weight")),
            ("pooler.dense.weight", None),
            ("embeddings.position_ids", None),
        ];
        for (from, to) in cases {
            assert_eq!(gguf_name(from).as_deref(), to, "{from}");
        }
    }

    #[test]
    fn half_floats_widen_exactly() {
        for (h, f) in [
            (0x0000u16, 0.0f32),
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x0001, 5.960_464_5e-8),
            (0x7bff, 65504.0),
        ] {
            assert_eq!(f16_to_f32(h), f, "{h:#06x}");
        }
        assert!(f16_to_f32(0x7e00).is_nan());
    }
}
