//! The MiniLM embedder.

use glassbox_models::embed::cosine;
use glassbox_models::{Embedder, EmbedderOptions};

use crate::common::{embedder, models};

#[test]
fn tokenizer_round_trip_and_no_fixed_padding() {
    let e = embedder();
    let text = "hello world, this is glassbox.";
    let ids = e.tokenize(text).unwrap();
    assert_eq!(e.detokenize(&ids).unwrap(), text);
    // [CLS] hi [SEP]: the shipped tokenizer.json would pad this to 128.
    assert_eq!(e.tokenize("hi").unwrap().len(), 3);
    // Truncated at the model's 256 tokens.
    assert_eq!(e.tokenize(&"word ".repeat(1000)).unwrap().len(), 256);
}

#[test]
fn paraphrase_scores_above_an_unrelated_sentence() {
    let e = embedder();
    let v = e
        .embed(&[
            "How do I reset my password?",
            "What are the steps to change my login password?",
            "The weather in Paris is sunny today.",
        ])
        .unwrap();
    let para = cosine(&v[0], &v[1]);
    let unrelated = cosine(&v[0], &v[2]);
    assert!(
        para > unrelated + 0.3,
        "paraphrase {para}, unrelated {unrelated}"
    );
}

#[test]
fn vectors_are_unit_length_and_384_wide() {
    let e = embedder();
    assert_eq!(e.dim(), 384);
    for v in e
        .embed(&["a", "", "a much longer sentence about vector search"])
        .unwrap()
    {
        assert_eq!(v.len(), 384);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
}

#[test]
fn batch_and_single_give_the_same_vectors() {
    let e = embedder();
    let texts = [
        "short",
        "a somewhat longer sentence, so that the batch needs padding",
        "Glassbox draws the path every request took through the topology.",
    ];
    let batch = e.embed(&texts).unwrap();
    for (text, b) in texts.iter().zip(&batch) {
        let single = e.embed_one(text).unwrap();
        let diff = single
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-4, "{text:?}: max difference {diff}");
    }
    // Small batches (several forward passes) agree with one big one.
    let small = Embedder::load(
        &glassbox_models::minilm_dir(&models()),
        EmbedderOptions {
            batch_size: 1,
            ..Default::default()
        },
    )
    .unwrap();
    let one_by_one = small.embed(&texts).unwrap();
    for (a, b) in one_by_one.iter().zip(&batch) {
        assert!(a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4));
    }
}

#[test]
fn fused_and_standard_attention_give_the_same_vectors() {
    let texts = [
        "short",
        "a somewhat longer sentence, so that the batch needs padding",
        "",
    ];
    let fused = embedder().embed(&texts).unwrap();
    let standard = Embedder::load(
        &glassbox_models::minilm_dir(&models()),
        EmbedderOptions {
            attention: glassbox_models::embed::onnx::Attention::Standard,
            ..Default::default()
        },
    )
    .unwrap()
    .embed(&texts)
    .unwrap();
    for ((text, a), b) in texts.iter().zip(&fused).zip(&standard) {
        let cos = cosine(a, b);
        assert!(cos > 0.99999, "{text:?}: cosine {cos}");
    }
}

#[test]
fn empty_input_gives_empty_output() {
    let none: [&str; 0] = [];
    assert!(embedder().embed(&none).unwrap().is_empty());
}

#[test]
fn version_tag_names_the_model() {
    let v = embedder().version();
    assert!(v.starts_with("all-minilm-l6-v2@"), "{v}");
    assert_eq!(v.len(), "all-minilm-l6-v2@".len() + 12);
}

#[test]
fn corrupted_weights_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = glassbox_models::minilm_dir(&models());
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::write(dir.path().join("model.safetensors"), b"not safetensors").unwrap();
    let err = Embedder::load(dir.path(), EmbedderOptions::default()).unwrap_err();
    assert_eq!(err.code(), "embed_weights", "{err}");
}

/// Our vectors agree with sentence-transformers' (the model's reference
/// implementation), recorded by `scripts/make-embedding-reference.py`.
#[test]
fn vectors_agree_with_sentence_transformers() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/minilm-reference.json");
    let reference: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let sentences: Vec<&str> = reference["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let ours = embedder().embed(&sentences).unwrap();
    for ((text, v), want) in sentences
        .iter()
        .zip(&ours)
        .zip(reference["vectors"].as_array().unwrap())
    {
        let want: Vec<f32> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let cos = cosine(v, &want);
        assert!(
            cos > 0.9999,
            "{text:?}: cosine {cos} with sentence-transformers"
        );
    }
}

/// Concurrent single-text calls share forward passes (dynamic batching) and
/// each gets its own text's vector, as if it had run alone.
#[test]
fn concurrent_calls_share_passes_and_keep_their_vectors() {
    let e = Embedder::load(
        &glassbox_models::minilm_dir(&models()),
        EmbedderOptions {
            batch_window: std::time::Duration::from_millis(50),
            ..Default::default()
        },
    )
    .expect("loading MiniLM");
    let texts: Vec<String> = (0..8)
        .map(|i| {
            format!(
                "Sentence number {i} is about {}.",
                ["cats", "tax", "GPUs", "rain"][i % 4]
            )
        })
        .collect();
    let alone: Vec<Vec<f32>> = texts.iter().map(|t| e.embed_one(t).unwrap()).collect();
    let before = e.batch_stats();
    let together: Vec<Vec<f32>> = std::thread::scope(|s| {
        let handles: Vec<_> = texts
            .iter()
            .map(|t| {
                let e = &e;
                s.spawn(move || e.embed_one(t).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (a, b) in alone.iter().zip(&together) {
        assert!(cosine(a, b) > 0.99999, "{}", cosine(a, b));
    }
    let after = e.batch_stats();
    assert_eq!(after.rows - before.rows, 8);
    assert!(
        after.passes - before.passes < 8,
        "no pass was shared: {before:?} -> {after:?}"
    );
}
