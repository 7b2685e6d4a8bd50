//! Prefix sharing between running requests (`session/share.rs`): two
//! requests that arrive together with a long common prefix evaluate it
//! once; the second takes the first's KV while the first still runs
//! (shared cells in one KV stream, a copy with a stream per slot), and
//! both answers are the ones each gets alone.

use std::sync::{Arc, Barrier};

use glassbox_models::{ChatMessage, Completion, GenerateRequest, LlmHandle, LlmOptions};

use crate::common::models;

/// A RAG-shaped request: the same long notes, then `question`.
fn request(question: &str) -> GenerateRequest {
    let notes = "Note: The Lumen Kettle Pro costs $129 and boils 1.7 liters of water in \
                 about four minutes. It keeps water warm for up to two hours, pairs with the \
                 Lumen Home app over Wi-Fi and comes with a two-year warranty.\n"
        .repeat(4);
    GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer in one short sentence, using only the notes."),
            ChatMessage::user(format!("{notes}\nQuestion: {question}")),
        ])
    }
}

fn handle(kv_cache_cells: Option<u32>) -> LlmHandle {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: 2,
        // Nothing in host memory: reuse can only come from the other request.
        host_cache_bytes: 0,
        batch_invariant: true,
        kv_cache_cells,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    LlmHandle::load(options).expect("loading SmolLM2")
}

/// Both requests submitted at the same moment on a fresh engine.
fn together(h: &LlmHandle, a: GenerateRequest, b: GenerateRequest) -> (Completion, Completion) {
    let start = Arc::new(Barrier::new(2));
    let spawn = |r: GenerateRequest| {
        let (h, start) = (h.clone(), Arc::clone(&start));
        std::thread::spawn(move || {
            start.wait();
            h.generate_blocking(r).expect("a completion")
        })
    };
    let (a, b) = (spawn(a), spawn(b));
    let join = |t: std::thread::JoinHandle<Completion>| t.join().expect("the request's thread");
    (join(a), join(b))
}

#[test]
fn requests_arriving_together_evaluate_their_common_prefix_once() {
    let (price, warranty) = (
        request("How much does it cost?"),
        request("How long is the warranty?"),
    );
    // A stream per slot (the state is copied), then one pooled stream
    // (the cells are shared).
    for kv_cache_cells in [None, Some(1536)] {
        let alone: Vec<Completion> = [&price, &warranty]
            .into_iter()
            .map(|r| handle(kv_cache_cells).generate_blocking(r.clone()).unwrap())
            .collect();
        assert!(alone.iter().all(|c| c.prompt_cached_tokens == 0));
        let h = handle(kv_cache_cells);
        let (a, b) = together(&h, price.clone(), warranty.clone());
        assert_eq!(a.text, alone[0].text, "kv_cache_cells {kv_cache_cells:?}");
        assert_eq!(b.text, alone[1].text, "kv_cache_cells {kv_cache_cells:?}");
        // Everything up to the question is shared: one of the two took it
        // from the other (which one evaluated it depends on arrival).
        let common = shared_prefix(&h, &price, &warranty);
        assert!(common > 200, "a long common prefix: {common} tokens");
        let hits = u64::from(a.prompt_cached_tokens) + u64::from(b.prompt_cached_tokens);
        assert!(
            hits + 8 >= common as u64 && hits <= common as u64,
            "hits {hits} ({} + {}), common prefix {common}, kv_cache_cells {kv_cache_cells:?}",
            a.prompt_cached_tokens,
            b.prompt_cached_tokens
        );
        assert_eq!(
            h.engine_load().prefix_hits,
            hits,
            "the engine counts them as prefix-cache hits"
        );
    }
}

/// Prompt tokens `a` and `b` have in common, as the engine renders them.
fn shared_prefix(h: &LlmHandle, a: &GenerateRequest, b: &GenerateRequest) -> usize {
    let tokens = |r: &GenerateRequest| {
        let text = h
            .render_prompt_blocking(r.messages.clone())
            .expect("a rendered prompt");
        h.tokenize_blocking(&text, true).expect("tokens")
    };
    let (a, b) = (tokens(a), tokens(b));
    a.iter().zip(&b).take_while(|(x, y)| x == y).count()
}
