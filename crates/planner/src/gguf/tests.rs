//! Unit tests of the GGUF reader: hand-built headers, truncation, hostile counts.

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
    header("llama", 2, &[])
}

/// A tiny header of architecture `arch` with `layers` layers and extra
/// `{arch}.KEY` integers.
fn header(arch: &str, layers: u32, extra: &[(&str, u32)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(2u64.to_le_bytes()); // tensors
    b.extend((7 + extra.len() as u64).to_le_bytes()); // kvs
    s(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    s(&mut b, arch);
    kv_u32(&mut b, &format!("{arch}.block_count"), layers);
    kv_u32(&mut b, &format!("{arch}.embedding_length"), 64);
    kv_u32(&mut b, &format!("{arch}.attention.head_count"), 4);
    kv_u32(&mut b, &format!("{arch}.feed_forward_length"), 128);
    for (k, v) in extra {
        kv_u32(&mut b, &format!("{arch}.{k}"), *v);
    }
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
fn a_sliding_window_takes_the_architecture_s_layer_pattern() {
    // Gemma 3: every sixth layer attends over the whole context.
    let b = header("gemma3", 12, &[("attention.sliding_window", 1024)]);
    let spec = read(&b[..], b.len() as u64, "g.gguf")
        .unwrap()
        .to_spec()
        .unwrap();
    let w = spec.sliding_window.unwrap();
    assert_eq!((w.window, w.layers), (1024, 10));
    // gpt-oss alternates.
    let b = header("gpt-oss", 12, &[("attention.sliding_window", 128)]);
    let spec = read(&b[..], b.len() as u64, "o.gguf")
        .unwrap()
        .to_spec()
        .unwrap();
    assert_eq!(spec.sliding_window.unwrap().layers, 6);
    // A window on an architecture whose pattern is not known is not taken.
    let b = header("llama", 12, &[("attention.sliding_window", 4096)]);
    let spec = read(&b[..], b.len() as u64, "l.gguf")
        .unwrap()
        .to_spec()
        .unwrap();
    assert_eq!(spec.sliding_window, None);
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
