//! Chunked prefill (`prefill_chunk`): a long prompt that arrives while
//! another request is generating is evaluated a few tokens per step, in
//! between that request's tokens, and its answer is the one it gets alone;
//! only while that request is streamed to someone watching its pace.

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

use crate::common::models;

/// A RAG-sized prompt (over 256 tokens).
fn long_request() -> GenerateRequest {
    let passage = "The Lumen Kettle Pro costs $129, boils 1.7 liters in four minutes, keeps \
                   water warm for up to two hours and pairs with the Lumen Home app. "
        .repeat(10);
    GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer using only the notes."),
            ChatMessage::user(format!(
                "Notes: {passage}\nQuestion: How much does it cost?"
            )),
        ])
    }
}

fn handle(prefill_chunk: Option<u32>) -> LlmHandle {
    handle_with(prefill_chunk, true)
}

fn handle_with(prefill_chunk: Option<u32>, batch_invariant: bool) -> LlmHandle {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: 2,
        prefix_cache: false,
        batch_invariant,
        prefill_chunk,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    LlmHandle::load(options).expect("loading SmolLM2")
}

#[test]
fn a_prompt_chunked_between_another_requests_tokens_gives_the_same_text() {
    let alone = handle(None).generate_blocking(long_request()).unwrap();
    assert!(alone.usage.prompt_tokens > 256, "{:?}", alone.usage);

    let h = handle(Some(8));
    let running = GenerateRequest {
        max_tokens: 64,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![ChatMessage::user(
            "Count from one to thirty in words.",
        )])
    };
    let running_alone = handle(None).generate_blocking(running.clone()).unwrap();
    let mut stream = h.stream(running).unwrap();
    // The first request is generating before the long prompt arrives, so
    // every step of its prefill is a chunk of at most 8 tokens.
    assert!(stream.next_blocking().is_some());
    let entering = {
        let h = h.clone();
        std::thread::spawn(move || h.generate_blocking(long_request()).unwrap())
    };
    let first = stream.finish_blocking().unwrap();
    let chunked = entering.join().unwrap();
    assert_eq!(chunked.text, alone.text, "chunked prefill changed the text");
    assert_eq!(chunked.usage, alone.usage);
    assert_eq!(
        first.text, running_alone.text,
        "the running request's text changed"
    );
}

#[test]
fn a_prompt_is_chunked_only_while_a_watched_stream_generates() {
    // Without `batch_invariant`, whose 63-token chunks would split the
    // unwatched prompt too.
    let h = handle_with(Some(8), false);
    let running = GenerateRequest {
        max_tokens: 64,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![ChatMessage::user(
            "Count from one to thirty in words.",
        )])
    };
    for watched in [true, false] {
        let mut stream = if watched {
            h.stream(running.clone())
        } else {
            h.stream_unwatched(running.clone())
        }
        .unwrap();
        // Generating before the long prompt arrives.
        let mut pieces = stream.next_blocking().expect("a first piece");
        let entering = {
            let h = h.clone();
            std::thread::spawn(move || h.generate_blocking(long_request()).unwrap())
        };
        while let Some(piece) = stream.next_blocking() {
            pieces.push_str(&piece);
        }
        let first = stream.finish_blocking().unwrap();
        let second = entering.join().unwrap();
        assert_eq!(
            pieces, first.text,
            "the pieces are the text, watched or not"
        );
        let tokens = second.usage.prompt_tokens;
        if watched {
            assert!(
                second.prompt_steps >= 10,
                "beside a watched stream the {tokens}-token prompt is chunked by 8: {} steps",
                second.prompt_steps
            );
        } else {
            assert_eq!(
                second.prompt_steps, 1,
                "beside an unwatched stream the {tokens}-token prompt is one step"
            );
        }
    }
}
