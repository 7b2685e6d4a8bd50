//! The real SmolLM2 GGUF file (fetched by scripts/fetch-models.sh).

use std::path::PathBuf;

use glassbox_planner::{ModelCatalogue, gguf, model_source};

fn smollm2() -> PathBuf {
    let dir = std::env::var_os("GLASSBOX_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/glassbox/models")
        });
    let path = dir.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        path.is_file(),
        "missing {}: run scripts/fetch-models.sh (or set GLASSBOX_MODELS)",
        path.display()
    );
    path
}

#[test]
fn smollm2_header_gives_the_catalogue_shape() {
    let info = gguf::read_file(&smollm2()).unwrap();
    assert_eq!(info.architecture(), Some("llama"));
    let spec = info.to_spec().unwrap();
    let cat = ModelCatalogue::builtin().unwrap();
    let known = cat.get("smollm2-135m").unwrap();
    assert_eq!(
        (
            spec.layers,
            spec.hidden,
            spec.heads,
            spec.kv_heads,
            spec.head_dim,
            spec.ffn,
            spec.vocab
        ),
        (
            known.layers,
            known.hidden,
            known.heads,
            known.kv_heads,
            known.head_dim,
            known.ffn,
            known.vocab
        )
    );
    // Parameters counted from tensors agree with the shape formula within 1%.
    assert!(
        (info.params() / known.total_params() - 1.0).abs() < 0.01,
        "{}",
        info.params()
    );
    let q = info.quant();
    assert!(q.name.contains("Q4_1"), "{}", q.name);
    // Q4_1 blocks are 5.0 bpw; higher-precision tensors push the file average up a little.
    assert!(
        (5.0..6.5).contains(&q.bits_per_weight),
        "{}",
        q.bits_per_weight
    );
}

#[test]
fn smollm2_resolves_as_a_model_argument() {
    let path = smollm2();
    let cat = ModelCatalogue::builtin().unwrap();
    let r = model_source::resolve(&path.display().to_string(), &cat).unwrap();
    assert_eq!(r.origin, "gguf");
    assert!(r.file_quant.is_some());
}

#[test]
fn corrupted_headers_error_instead_of_panicking() {
    let bytes = std::fs::read(smollm2()).unwrap();
    let head = &bytes[..bytes.len().min(1 << 20)];
    // Deterministic xorshift mutations of the real header.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut errors = 0;
    for _ in 0..200 {
        let mut buf = head.to_vec();
        for _ in 0..4 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x as usize) % 4096.min(buf.len());
            buf[i] = (x >> 32) as u8;
        }
        if gguf::read(&buf[..], buf.len() as u64, "mutated").is_err() {
            errors += 1;
        }
    }
    // Reaching here means no mutation panicked or exhausted memory; mutated
    // lengths and type tags must be reported as errors.
    assert!(errors > 0);
}
