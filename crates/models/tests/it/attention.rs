//! Attention for a few query rows: the kernel Glassbox builds into every CPU
//! variant of ggml (`crates/models/kernels/flash-attn-rows.cpp`,
//! docs/adr/0004-cpu-kernels.md, "Attention for a few query rows").

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

use crate::common::models;

/// Every CPU variant library of this build carries the kernel: a build of
/// llama.cpp without the CMake hook (or a stale one) fails here rather than
/// running ggml's slower kernel unnoticed.
#[test]
#[cfg(target_arch = "x86_64")]
fn every_cpu_variant_carries_the_few_rows_attention_kernel() {
    let dir = llama_cpp_sys_2::BACKENDS_DIR.expect("llama.cpp built with dynamic backends");
    let libs: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("the backends folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libggml-cpu-"))
        })
        .collect();
    assert!(libs.len() >= 10, "CPU variants in {dir}: {libs:?}");
    let unmarked: Vec<_> = libs
        .iter()
        .filter(|p| {
            !glassbox_models::cpu::carries_mark(p, glassbox_models::cpu::FLASH_ATTN_ROWS_MARK)
        })
        .collect();
    assert!(
        unmarked.is_empty(),
        "built without crates/models/kernels/flash-attn-rows.cpp: {unmarked:?} \
         (rebuild llama.cpp: `cargo clean -p llama-cpp-sys-2`, then build)"
    );
}

fn passage_request(passage: &str, question: &str) -> GenerateRequest {
    GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer using only the passage. Quote it exactly."),
            ChatMessage::user(format!("Passage: {passage}\nQuestion: {question}")),
        ])
    }
}

/// The greedy answers of `requests`, sent together to one fresh handle.
fn answers(
    flash_attention: bool,
    kv_cache_cells: Option<u32>,
    requests: &[GenerateRequest],
) -> Vec<(String, u32)> {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: requests.len() as u32,
        kv_cache_cells,
        flash_attention,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    let running: Vec<_> = requests
        .iter()
        .map(|r| {
            let (h, r) = (h.clone(), r.clone());
            std::thread::spawn(move || h.generate_blocking(r).expect("generation"))
        })
        .collect();
    running
        .into_iter()
        .map(|t| {
            let c = t.join().expect("generation thread");
            (c.text, c.usage.prompt_tokens)
        })
        .collect()
}

fn first_words(text: &str, n: usize) -> Vec<&str> {
    text.split_whitespace().take(n).collect()
}

/// The kernel against an independent computation of the same attention:
/// llama.cpp without flash attention (matrix products and a softmax). The
/// two round differently, so texts are compared by their first words, on
/// answers that quote their passage; a wrong mask, head mapping or merge of
/// partial sums gives another answer from the first token. Covers the
/// kernel's two paths: one query row over 512+ cells (split over the
/// threads) and several rows over a shared, masked cache.
#[test]
fn few_row_attention_gives_the_answers_of_the_matrix_path() {
    let pro = "The Glassbox Pro plan costs $129 per month and includes priority support, \
               single sign-on and a 99.9% uptime guarantee. ";
    let long = vec![passage_request(
        &format!("{}The Team plan costs $49 per month.", pro.repeat(17)),
        "What does the Team plan cost?",
    )];
    let (ours, reference) = (answers(true, None, &long), answers(false, None, &long));
    assert!(ours[0].1 > 600, "the long prompt has {} tokens", ours[0].1);
    assert!(!ours[0].0.trim().is_empty(), "empty answer");
    assert_eq!(
        first_words(&ours[0].0, 5),
        first_words(&reference[0].0, 5),
        "one row over {} cells:\n  kernel: {}\n  matrix: {}",
        ours[0].1,
        ours[0].0,
        reference[0].0
    );

    let together = vec![
        passage_request(pro, "What does the Pro plan cost?"),
        passage_request(
            "Returns are accepted within 30 days of delivery with the original receipt.",
            "How long do I have to return an item?",
        ),
        passage_request(
            "The kettle's E3 error means the water tank is empty; refill it and restart.",
            "What does error E3 mean?",
        ),
    ];
    // One pool of cells for the three: one KV stream, each row masked to
    // its own sequence's cells.
    let pooled = Some(1536);
    let (ours, reference) = (
        answers(true, pooled, &together),
        answers(false, pooled, &together),
    );
    for ((a, _), (b, _)) in ours.iter().zip(&reference) {
        assert!(!a.trim().is_empty(), "empty answer");
        assert_eq!(
            first_words(a, 5),
            first_words(b, 5),
            "rows together:\n  kernel: {a}\n  matrix: {b}"
        );
    }
}
