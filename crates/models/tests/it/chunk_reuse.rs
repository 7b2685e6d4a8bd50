//! Per-chunk KV reuse (`KvReuse::Chunks`, ADR 0013): a retrieved chunk's
//! saved KV placed into a later request instead of evaluating it again.
//! Placed where it was computed, with nothing recomputed, it is the KV a
//! full prefill makes, up to the rounding of the CPU's kernels, so the
//! greedy answer begins as the exact one (on Intel it is the exact one; on
//! an AMD EPYC it parts after seven words). Moved elsewhere, the keys are
//! turned on the host as llama.cpp's own shift would turn them. And the
//! mode is off unless configured.

use glassbox_models::{
    ChatMessage, ChunkReuse, Completion, GenerateRequest, KvReuse, LlmHandle, LlmOptions,
    PromptChunk,
};

use crate::common::models;

const KETTLE: &str = "The Lumen Kettle Pro costs $129 and boils 1.7 liters of water in about \
                      four minutes. It keeps water warm for up to two hours and pairs with the \
                      Lumen Home app over Wi-Fi.";
const WARRANTY: &str = "Every Lumen kettle comes with a two-year warranty. Returns are accepted \
                        within 30 days of delivery when the kettle is unused and in its box.";

fn chunk(id: &str, text: &str) -> PromptChunk {
    PromptChunk {
        id: id.to_owned(),
        text: text.to_owned(),
    }
}

/// A rag-chat-shaped request quoting `notes` in this order.
fn rag(notes: &[&PromptChunk], question: &str) -> GenerateRequest {
    let body: String = notes
        .iter()
        .map(|c| format!("\nNote: {}\n", c.text))
        .collect();
    GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        chunks: notes.iter().map(|&c| c.clone()).collect(),
        ..GenerateRequest::chat(vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user(format!(
                "Answer the question using only these notes.\n{body}\nQuestion: {question}"
            )),
        ])
    }
}

fn handle(kv_reuse: KvReuse) -> LlmHandle {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: 1,
        // Nothing comes from the prefix cache: what is reused is placed.
        prefix_cache: false,
        host_cache_bytes: 0,
        batch_invariant: true,
        kv_reuse,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    LlmHandle::load(options).expect("loading SmolLM2")
}

/// Asks `h` about the kettle with its notes in one order (nothing to place
/// yet), then about the warranty with them swapped, so both chunks move
/// (one forward, one back); returns the second answer.
fn first_then_moved(h: &LlmHandle) -> Completion {
    let (kettle, warranty) = (chunk("kettle#0", KETTLE), chunk("warranty#0", WARRANTY));
    let first = h
        .generate_blocking(rag(&[&kettle, &warranty], "How much does it cost?"))
        .expect("the first answer");
    assert_eq!(first.prompt_placed_tokens, 0, "nothing saved yet");
    h.generate_blocking(rag(&[&warranty, &kettle], "What is the warranty?"))
        .expect("the answer with both chunks moved")
}

#[test]
fn a_chunk_placed_where_it_was_computed_gives_the_full_prefills_answer() {
    let (kettle, warranty) = (chunk("kettle#0", KETTLE), chunk("warranty#0", WARRANTY));
    let request = rag(&[&kettle, &warranty], "How much does the kettle cost?");
    let exact = handle(KvReuse::Exact)
        .generate_blocking(request.clone())
        .unwrap();
    let h = handle(KvReuse::Chunks(ChunkReuse {
        recompute: 0,
        ..ChunkReuse::default()
    }));
    let first = h.generate_blocking(request.clone()).unwrap();
    assert_eq!(first.prompt_placed_tokens, 0, "nothing saved yet");
    let placed = h.generate_blocking(request).unwrap();
    // Both chunks placed, each at the position it was saved from.
    assert!(
        placed.prompt_placed_tokens > 40,
        "placed {} of {} prompt tokens",
        placed.prompt_placed_tokens,
        placed.usage.prompt_tokens
    );
    assert_eq!(first.text, exact.text);
    // Placed in place, the answer begins as the full prefill's. It is the
    // same answer on the Intel machines this was built on; on an AMD EPYC
    // (2026-12-04) it parts after "The Lumen Kettle Pro costs $129 and":
    // placed KV is not bit-identical to recomputed KV on every CPU's
    // kernels (ADR 0013), so only the opening is held to here.
    let words = |t: &str| t.split_whitespace().take(7).collect::<Vec<_>>().join(" ");
    assert_eq!(
        words(&placed.text),
        words(&exact.text),
        "placed in place: {:?} vs the full prefill's {:?}",
        placed.text,
        exact.text
    );
    assert_eq!(placed.usage.prompt_tokens, exact.usage.prompt_tokens);
}

#[test]
fn chunks_moved_to_other_positions_are_placed_with_the_first_tokens_recomputed() {
    let recompute = 4;
    let h = handle(KvReuse::Chunks(ChunkReuse {
        recompute,
        ..ChunkReuse::default()
    }));
    let moved = first_then_moved(&h);
    let tokens = |text: &str| h.tokenize_blocking(text, false).unwrap().len() as u32;
    let whole = tokens(KETTLE) + tokens(WARRANTY);
    // Each chunk's tokens but its first `recompute` (a token or so either
    // side of a chunk may merge with its neighbour's text).
    let expected = whole - 2 * recompute;
    assert!(
        moved.prompt_placed_tokens + 4 >= expected && moved.prompt_placed_tokens <= expected,
        "placed {} tokens, expected about {expected}",
        moved.prompt_placed_tokens
    );
    assert!(!moved.text.trim().is_empty(), "an answer: {:?}", moved.text);
}

/// A chunk placed at another position is moved by rotating its saved keys
/// on the host (`move_on_host`, the default) instead of by llama.cpp's
/// shift of the whole cache: the same rotation, so the same KV up to the
/// rounding of 16-bit keys, and the same greedy answer as llama.cpp's own
/// move gives.
#[test]
fn a_chunk_moved_on_the_host_answers_as_one_moved_by_llama_cpp() {
    let answers = |move_on_host: bool| {
        let moved = first_then_moved(&handle(KvReuse::Chunks(ChunkReuse {
            recompute: 4,
            move_on_host,
            ..ChunkReuse::default()
        })));
        assert!(
            moved.prompt_placed_tokens > 40,
            "placed {}",
            moved.prompt_placed_tokens
        );
        moved
    };
    let (host, llama) = (answers(true), answers(false));
    assert_eq!(host.prompt_placed_tokens, llama.prompt_placed_tokens);
    // A move the wrong way round, by the wrong angle or with the wrong
    // pairs of dimensions answers differently from the first words on. The
    // two right moves differ by the rounding of 16-bit keys: on AVX-512 and
    // AVX2 kernels they gave the same first ten words, on ggml's AMX kernels
    // (an AMX Xeon, 2026-12-05) they part after seven ("... a reliable and
    // durable" against "... and convenient"), a near tie; seven are held.
    let words = |t: &str| t.split_whitespace().take(7).collect::<Vec<_>>().join(" ");
    assert_eq!(
        words(&host.text),
        words(&llama.text),
        "moved on the host: {:?}; by llama.cpp: {:?}",
        host.text,
        llama.text
    );
    assert!(!host.text.trim().is_empty());
}

#[test]
fn approximate_reuse_is_off_unless_configured() {
    assert_eq!(
        LlmOptions::new("m.gguf").kv_reuse,
        KvReuse::Exact,
        "exact by default"
    );
    let kettle = chunk("kettle#0", KETTLE);
    let with_chunks = rag(&[&kettle], "How much does the kettle cost?");
    let without = GenerateRequest {
        chunks: Vec::new(),
        ..with_chunks.clone()
    };
    let h = handle(KvReuse::Exact);
    let plain = h.generate_blocking(without).unwrap();
    for _ in 0..2 {
        let c = h.generate_blocking(with_chunks.clone()).unwrap();
        assert_eq!(c.prompt_placed_tokens, 0, "exact mode places nothing");
        assert_eq!(c.text, plain.text);
    }
}

/// Two requests at once, each placing chunks the other saved: the scratch
/// sequence is shared in turn, and both answers arrive.
#[test]
fn concurrent_requests_place_chunks_side_by_side() {
    let (kettle, warranty) = (chunk("kettle#0", KETTLE), chunk("warranty#0", WARRANTY));
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: 2,
        kv_reuse: KvReuse::Chunks(ChunkReuse::default()),
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    h.generate_blocking(rag(&[&kettle, &warranty], "How much does it cost?"))
        .unwrap();
    let spawn = |r: GenerateRequest| {
        let h = h.clone();
        std::thread::spawn(move || h.generate_blocking(r).unwrap())
    };
    let a = spawn(rag(&[&warranty, &kettle], "What is the warranty?"));
    let b = spawn(rag(&[&warranty], "Can I return it?"));
    for c in [a.join().unwrap(), b.join().unwrap()] {
        assert!(c.prompt_placed_tokens > 0, "{c:?}");
        assert!(!c.text.trim().is_empty());
    }
    assert!(h.engine_load().chunk_placed_tokens > 0);
    assert!(h.engine_load().chunk_cache_bytes > 0);
}
