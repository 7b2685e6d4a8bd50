//! The local LLM (SmolLM2-135M-Instruct Q4_1 over llama.cpp).

use glassbox_models::{
    ChatMessage, FinishReason, GenerateRequest, LlmError, LlmHandle, LlmOptions,
};

use crate::common::{llm, models};

fn question() -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a concise assistant."),
        ChatMessage::user("Name three colours of the rainbow."),
    ]
}

fn request(max_tokens: u32, temperature: f32, seed: Option<u32>) -> GenerateRequest {
    GenerateRequest {
        max_tokens,
        temperature,
        seed,
        ..GenerateRequest::chat(question())
    }
}

#[test]
fn tokenizer_round_trip() {
    let text = "Glassbox explains every request: path, cost and reasoning. Ünïcödé ☃ too!";
    let tokens = llm().tokenize_blocking(text, false).unwrap();
    assert!(tokens.len() > 5);
    assert_eq!(llm().detokenize_blocking(&tokens).unwrap(), text);
    // Special tokens of the chat template are single tokens.
    assert_eq!(
        llm()
            .tokenize_blocking("<|im_start|>", false)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn chat_template_comes_from_the_gguf() {
    let info = llm().info();
    assert!(
        info.chat_template
            .as_deref()
            .unwrap_or("")
            .contains("im_start"),
        "{info:?}"
    );
    let prompt = llm().render_prompt_blocking(question()).unwrap();
    assert!(
        prompt.contains("<|im_start|>user\nName three colours"),
        "{prompt}"
    );
    assert!(prompt.ends_with("<|im_start|>assistant\n"), "{prompt}");
}

#[test]
fn version_tag_is_file_name_and_hash() {
    let version = llm().version();
    let (name, hash) = version.split_once('@').unwrap();
    assert_eq!(name, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(hash.len(), 12);
    assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
}

#[test]
fn same_seed_gives_the_same_text() {
    let a = llm()
        .generate_blocking(request(16, 0.9, Some(1234)))
        .unwrap();
    let b = llm()
        .generate_blocking(request(16, 0.9, Some(1234)))
        .unwrap();
    assert_eq!(a.text, b.text);
    assert_eq!(a.seed, 1234);
    assert!(!a.text.is_empty());
}

#[test]
fn temperature_zero_is_deterministic() {
    let a = llm().generate_blocking(request(16, 0.0, None)).unwrap();
    let b = llm().generate_blocking(request(16, 0.0, Some(99))).unwrap();
    assert_eq!(a.text, b.text);
}

#[test]
fn usage_counts_are_exact() {
    let prompt = llm().render_prompt_blocking(question()).unwrap();
    let prompt_tokens = llm().tokenize_blocking(&prompt, true).unwrap().len() as u32;
    let c = llm().generate_blocking(request(8, 0.0, None)).unwrap();
    assert_eq!(c.usage.prompt_tokens, prompt_tokens);
    assert!(c.usage.completion_tokens <= 8);
    if c.finish_reason == FinishReason::Length {
        assert_eq!(c.usage.completion_tokens, 8);
    }
    assert_eq!(
        c.usage.total_tokens(),
        prompt_tokens + c.usage.completion_tokens
    );
    assert!(c.model.starts_with("SmolLM2-135M-Instruct.Q4_1.gguf@"));
}

#[test]
fn stop_sequence_cuts_the_text() {
    let full = llm().generate_blocking(request(24, 0.0, None)).unwrap();
    // Stop at the second word of what the model says anyway (greedy, so the
    // same text comes out again up to the stop).
    let word = full
        .text
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("too short to test stops: {:?}", full.text));
    let at = full.text.find(word).unwrap();
    let stopped = llm()
        .generate_blocking(GenerateRequest {
            stop: vec![word.to_owned()],
            ..request(24, 0.0, None)
        })
        .unwrap();
    assert_eq!(stopped.text, full.text[..at]);
    assert_eq!(stopped.finish_reason, FinishReason::Stop);
    assert!(stopped.usage.completion_tokens <= full.usage.completion_tokens);
}

#[test]
fn streaming_yields_the_completion_in_pieces() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut stream = llm().stream(request(12, 0.0, None)).unwrap();
        let mut pieces = Vec::new();
        while let Some(piece) = stream.next().await {
            pieces.push(piece);
        }
        let done = stream.finish().await.unwrap();
        assert!(pieces.len() > 1, "{pieces:?}");
        assert_eq!(pieces.concat(), done.text);
        let again = llm().generate(request(12, 0.0, None)).await.unwrap();
        assert_eq!(again.text, done.text);
    });
}

#[test]
fn empty_request_is_refused_before_queueing() {
    let err = llm()
        .generate_blocking(GenerateRequest::default())
        .unwrap_err();
    assert!(matches!(err, LlmError::EmptyInput), "{err}");
    assert_eq!(err.code(), "llm_empty_input");
    let err = llm()
        .generate_blocking(GenerateRequest {
            max_tokens: 0,
            ..request(1, 0.0, None)
        })
        .unwrap_err();
    assert_eq!(err.code(), "llm_invalid_request");
}

#[test]
fn prompt_longer_than_the_context_is_an_error() {
    let long = "word ".repeat(2000);
    let err = llm()
        .generate_blocking(GenerateRequest {
            max_tokens: 4,
            ..GenerateRequest::chat(vec![ChatMessage::user(long)])
        })
        .unwrap_err();
    assert_eq!(err.code(), "llm_prompt_too_long", "{err}");
}

#[test]
fn missing_model_names_the_path_and_the_fix() {
    let path = models().join("nope/missing.gguf");
    let err = LlmHandle::load(LlmOptions::new(&path)).unwrap_err();
    assert_eq!(err.code(), "llm_model_missing");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("glassbox models fetch"), "{msg}");
}

#[test]
fn corrupted_gguf_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let not_gguf = dir.path().join("text.gguf");
    std::fs::write(&not_gguf, b"this is not a model").unwrap();
    let err = LlmHandle::load(LlmOptions::new(&not_gguf)).unwrap_err();
    assert_eq!(err.code(), "llm_not_gguf", "{err}");

    // A real header cut short: the tensor data is missing.
    let real = std::fs::read(glassbox_models::smollm2_path(&models())).unwrap();
    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &real[..real.len() / 3]).unwrap();
    let err = LlmHandle::load(LlmOptions::new(&truncated)).unwrap_err();
    assert_eq!(err.code(), "llm_model_load", "{err}");
    assert!(err.to_string().contains("truncated.gguf"));

    // Magic only, garbage after it.
    let garbage = dir.path().join("garbage.gguf");
    let mut bytes = b"GGUF".to_vec();
    bytes.extend((0..4096u32).map(|i| (i * 7919 % 251) as u8));
    std::fs::write(&garbage, bytes).unwrap();
    let err = LlmHandle::load(LlmOptions::new(&garbage)).unwrap_err();
    assert_eq!(err.code(), "llm_model_load", "{err}");
}

/// A second handle on the same model, with continuous batching on, and the
/// turn to use it: the batching tests check the handle's load, so they run
/// one after another (and one thread keeps the 2-core CI machine from being
/// oversubscribed next to the shared handle).
fn batched() -> (&'static LlmHandle, std::sync::MutexGuard<'static, ()>) {
    static LLM: std::sync::OnceLock<LlmHandle> = std::sync::OnceLock::new();
    let turn = turn();
    let handle = LLM.get_or_init(|| {
        let options = LlmOptions {
            threads: Some(1),
            n_ctx: 1024,
            max_num_seqs: 4,
            batch_invariant: true,
            ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
        };
        LlmHandle::load(options).expect("loading SmolLM2 with batching")
    });
    (handle, turn)
}

/// The turn to run a batching test: one at a time.
fn turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Polls `f` until it holds; false after `limit` (a hang guard, not a speed check).
fn eventually(limit: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    f()
}

#[test]
fn concurrent_requests_run_in_one_batch() {
    let (h, _turn) = batched();
    assert_eq!(h.info().max_num_seqs, 4);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let h = h.clone();
            std::thread::spawn(move || {
                let mut r = request(48, 0.0, None);
                r.messages.push(glassbox_models::ChatMessage::user(format!(
                    "Say it {i} times."
                )));
                h.generate_blocking(r).unwrap()
            })
        })
        .collect();
    let mut most = 0;
    let watcher = eventually(std::time::Duration::from_secs(120), || {
        most = most.max(h.engine_load().running);
        workers.iter().all(|w| w.is_finished())
    });
    assert!(watcher, "requests did not finish");
    for w in workers {
        let c = w.join().unwrap();
        assert!(!c.text.is_empty());
        assert!(c.usage.completion_tokens > 0 && c.usage.completion_tokens <= 48);
    }
    assert!(most >= 2, "at most {most} request(s) ran at once");
    let load = h.engine_load();
    assert_eq!((load.running, load.kv_reserved), (0, 0), "{load:?}");
}

#[test]
fn a_dropped_stream_leaves_the_batch_and_frees_its_cells() {
    let (h, _turn) = batched();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut stream = h.stream(request(400, 0.7, Some(7))).unwrap();
        assert!(stream.next().await.is_some());
        assert!(h.engine_load().kv_reserved > 0);
        drop(stream);
    });
    assert!(
        eventually(std::time::Duration::from_secs(30), || {
            let load = h.engine_load();
            load.running == 0 && load.kv_reserved == 0
        }),
        "{:?}",
        h.engine_load()
    );
    // The freed slot serves the next request.
    let next = h.generate_blocking(request(8, 0.0, None)).unwrap();
    assert!(!next.text.is_empty());
}

/// Greedy decoding gives the same text alone or inside a full batch of other
/// requests (each sequence has its own KV stream, so its attention sums run
/// over the same cells in the same order either way).
#[test]
fn greedy_text_is_the_same_alone_or_in_a_full_batch() {
    let (h, _turn) = batched();
    let alone = h.generate_blocking(request(48, 0.0, None)).unwrap();
    let others = [
        "Write a long story about a kettle.",
        "List ten fruits, one per line, with a sentence about each.",
        "Explain what a vector index is to a child, in detail.",
    ];
    let mut workers: Vec<_> = others
        .iter()
        .map(|text| {
            let h = h.clone();
            let text = (*text).to_owned();
            std::thread::spawn(move || {
                let r = GenerateRequest {
                    max_tokens: 64,
                    temperature: 0.0,
                    ..GenerateRequest::chat(vec![ChatMessage::user(text)])
                };
                h.generate_blocking(r).unwrap().text
            })
        })
        .collect();
    // Joins the batch while the others run (some in prefill, some decoding).
    let h2 = h.clone();
    workers.push(std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(30));
        h2.generate_blocking(request(48, 0.0, None)).unwrap().text
    }));
    let texts: Vec<String> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(texts[3], alone.text);
    assert!(texts[..3].iter().all(|t| !t.is_empty()));
}

/// A request whose prompt an earlier one in the same slot shared reuses that
/// KV (all but the last two prompt tokens) and gets the same text as without.
#[test]
fn a_shared_prompt_prefix_is_reused_and_changes_nothing() {
    let (h, _turn) = batched();
    let first = h.generate_blocking(request(24, 0.0, None)).unwrap();
    let mid = h.engine_load();
    let second = h.generate_blocking(request(24, 0.0, None)).unwrap();
    let after = h.engine_load();
    assert_eq!(first.text, second.text);
    let prompt = u64::from(second.usage.prompt_tokens);
    assert_eq!(after.prefix_queries - mid.prefix_queries, prompt);
    // All but the last two prompt tokens (evaluated again as a chunk of two,
    // on the kernels a cold prompt's last chunk uses).
    assert_eq!(after.prefix_hits - mid.prefix_hits, prompt - 2);
    // A different question after the same system prompt reuses the shared head.
    let other = fruit_question();
    let cold = llm_cold(&other);
    let warm = h.generate_blocking(other).unwrap();
    let end = h.engine_load();
    assert!(end.prefix_hits - after.prefix_hits >= 5, "{end:?}");
    assert_eq!(warm.text, cold);
}

/// With one slot, a prompt whose slot another request took comes back from
/// host memory: all but its last two tokens are restored, not evaluated,
/// and the text is the same, with a KV cache per slot or one pool. Without
/// the host tier nothing is restored.
#[test]
fn a_prompt_whose_slot_was_taken_is_restored_from_host_memory() {
    let _turn = turn();
    let other = fruit_question();
    let mut restored = Vec::new();
    for (host_cache_bytes, kv_cache_cells) in [(64 << 20, None), (0, None), (64 << 20, Some(512))] {
        let options = LlmOptions {
            threads: Some(1),
            n_ctx: 1024,
            max_num_seqs: 1,
            batch_invariant: true,
            host_cache_bytes,
            kv_cache_cells,
            ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
        };
        let h = LlmHandle::load(options).expect("loading SmolLM2");
        let first = h.generate_blocking(copying_request()).unwrap();
        h.generate_blocking(other.clone()).unwrap();
        let before = h.engine_load();
        let again = h.generate_blocking(copying_request()).unwrap();
        let after = h.engine_load();
        assert_eq!(
            again.text, first.text,
            "host_cache_bytes {host_cache_bytes}"
        );
        restored.push((
            u64::from(again.prompt_cached_tokens),
            after.prefix_host_hits - before.prefix_host_hits,
            after.host_cache_bytes,
            u64::from(again.usage.prompt_tokens),
        ));
    }
    for (cached, host_hits, bytes, prompt) in [restored[0], restored[2]] {
        assert_eq!(cached, prompt - 2, "{restored:?}");
        assert_eq!(host_hits, prompt - 2, "{restored:?}");
        assert!(bytes > 0, "{restored:?}");
    }
    let (cached, host_hits, bytes, _) = restored[1];
    assert!(
        cached < 8,
        "only the template head is shared with the other prompt: {restored:?}"
    );
    assert_eq!((host_hits, bytes), (0, 0), "{restored:?}");
}

/// With a KV stream per slot, a request that arrives while another runs
/// goes to the slot next to it (one micro-batch per step), and a prompt
/// cached in a slot further away is copied in: all but its last two
/// tokens reused, the same text. The host tier is off, so only a copy
/// between slots can explain the reuse.
#[test]
fn a_prompt_cached_in_a_slot_apart_is_copied_next_to_the_running_one() {
    let _turn = turn();
    let options = LlmOptions {
        threads: Some(1),
        n_ctx: 1024,
        max_num_seqs: 3,
        batch_invariant: true,
        host_cache_bytes: 0,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    let long = |text: &str| GenerateRequest {
        max_tokens: 160,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![ChatMessage::user(text.to_owned())])
    };
    let spawn = |r: GenerateRequest| {
        let h = h.clone();
        std::thread::spawn(move || h.generate_blocking(r).unwrap())
    };
    let running = |n: usize| {
        assert!(
            eventually(std::time::Duration::from_secs(60), || h
                .engine_load()
                .running
                >= n),
            "{:?}",
            h.engine_load()
        );
    };
    // Slots 0, 1 and 2 in turn: the story, the list, then the copying request.
    let story = spawn(long("Write a long story about a kettle."));
    running(1);
    let list = spawn(long(
        "List ten fruits, one per line, with a sentence about each.",
    ));
    running(2);
    let first = h.generate_blocking(copying_request()).unwrap();
    story.join().unwrap();
    list.join().unwrap();
    // The story again takes slot 0, where its prompt is cached; the copying
    // request, sent while it runs, goes to slot 1 and takes its prompt from
    // slot 2.
    let story = spawn(long("Write a long story about a kettle."));
    running(1);
    let again = h.generate_blocking(copying_request()).unwrap();
    story.join().unwrap();
    assert_eq!(again.text, first.text);
    assert_eq!(again.prompt_cached_tokens, again.usage.prompt_tokens - 2);
    assert_eq!(h.engine_load().prefix_host_hits, 0);
}

/// A short greedy question: [`request`]'s system prompt with another
/// question, and only the chat template's head in common with
/// [`copying_request`].
fn fruit_question() -> GenerateRequest {
    GenerateRequest {
        max_tokens: 8,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("You are a concise assistant."),
            ChatMessage::user("Name a fruit."),
        ])
    }
}

/// `request` on a handle of its own that has never seen another prompt
/// (two threads: llama.cpp's kernel choices depend on the thread count).
fn llm_cold(request: &GenerateRequest) -> String {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        batch_invariant: true,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    h.generate_blocking(request.clone())
        .expect("cold generation")
        .text
}

/// A RAG-style request whose answer copies from its prompt.
fn copying_request() -> GenerateRequest {
    GenerateRequest {
        max_tokens: 48,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer using only the passage. Quote it exactly."),
            ChatMessage::user(
                "Passage: The Glassbox Pro plan costs $129 per month and includes \
                 priority support, single sign-on and a 99.9% uptime guarantee.\n\
                 Question: What does the Pro plan cost and what does it include?",
            ),
        ])
    }
}

/// Prompt lookup that drafts at every chance (one-token matches, four
/// tokens, any batch): the most speculation for the tests that show it
/// changes no text.
fn eager_lookup() -> glassbox_models::PromptLookup {
    glassbox_models::PromptLookup {
        num_tokens: 4,
        max_ngram: 3,
        min_ngram: 1,
        max_batch: usize::MAX,
    }
}

/// Speculative decoding by prompt lookup gives the text of plain greedy
/// decoding, token for token, accepts some drafts on an answer that copies
/// its passage, and reports both in the engine's counters.
#[test]
fn prompt_lookup_changes_nothing_but_the_speed() {
    let options = LlmOptions {
        threads: Some(1),
        n_ctx: 1024,
        max_num_seqs: 1,
        prompt_lookup: Some(eager_lookup()),
        batch_invariant: true,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let spec = LlmHandle::load(options).expect("loading SmolLM2 with prompt lookup");
    let requests = [copying_request(), request(40, 0.0, None)];
    for r in &requests {
        let fast = spec.generate_blocking(r.clone()).unwrap();
        let plain = llm_cold(r);
        assert_eq!(fast.text, plain, "speculation changed the text");
    }
    let copied = spec.generate_blocking(copying_request()).unwrap();
    assert!(copied.draft_tokens > 0, "{copied:?}");
    assert!(
        copied.accepted_tokens > 0 && copied.accepted_tokens <= copied.draft_tokens,
        "{copied:?}"
    );
    let load = spec.engine_load();
    assert!(load.spec_draft_tokens >= u64::from(copied.draft_tokens));
    assert!(load.spec_accepted_tokens >= u64::from(copied.accepted_tokens));
    // Sampled requests never speculate (a draft is checked against the
    // greedy choice only).
    let sampled = spec.generate_blocking(request(16, 0.8, Some(3))).unwrap();
    assert_eq!(sampled.draft_tokens, 0);
}

/// Each completion reports its queue time, TTFT and TPOT, and the engine's
/// histograms count it.
#[test]
fn completions_carry_their_timing_and_the_histograms_count_them() {
    let (h, _turn) = batched();
    let before = h.engine_load().latency;
    let c = h.generate_blocking(request(16, 0.0, None)).unwrap();
    let t = c.timing;
    let ttft = t.ttft_ms.expect("a token was generated");
    assert!(t.queue_ms >= 0.0 && t.queue_ms <= ttft, "{t:?}");
    assert!(ttft <= t.e2e_ms, "{t:?}");
    if c.usage.completion_tokens > 1 {
        let tpot = t.tpot_ms.expect("several tokens");
        assert!(tpot > 0.0 && tpot * f64::from(c.usage.completion_tokens - 1) <= t.e2e_ms);
    }
    let after = h.engine_load().latency;
    assert_eq!(after.e2e_latency.count, before.e2e_latency.count + 1);
    assert_eq!(
        after.time_to_first_token.count,
        before.time_to_first_token.count + 1
    );
    assert!(after.e2e_latency.sum >= before.e2e_latency.sum + t.e2e_ms / 1e3 - 1e-6);
}

/// A RAG-sized prompt (over 256 tokens: llama.cpp would pick other attention
/// kernels for it alone than in a batch) gives the same greedy text alone,
/// with speculation, and in a batch next to another request.
#[test]
fn a_long_prompt_gives_the_same_text_alone_batched_and_speculating() {
    let passage = "The Glassbox Pro plan costs $129 per month and includes priority support, \
                   single sign-on and a 99.9% uptime guarantee. "
        .repeat(12);
    let long = GenerateRequest {
        max_tokens: 32,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer using only the passage."),
            ChatMessage::user(format!(
                "Passage: {passage}\nQuestion: What does Pro include?"
            )),
        ])
    };
    let alone = llm_cold(&long);
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: 2,
        prompt_lookup: Some(eager_lookup()),
        batch_invariant: true,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    let spec = h.generate_blocking(long.clone()).unwrap();
    assert!(spec.usage.prompt_tokens > 256, "{:?}", spec.usage);
    assert_eq!(spec.text, alone, "speculation changed a long prompt's text");
    let other = {
        let h = h.clone();
        std::thread::spawn(move || h.generate_blocking(request(48, 0.0, None)).unwrap())
    };
    let batched = h.generate_blocking(long).unwrap();
    assert!(!other.join().unwrap().text.is_empty());
    assert_eq!(batched.text, alone, "batching changed a long prompt's text");
}

/// With a KV pool smaller than the running requests grow to, the newest is
/// preempted and recomputed: every request still finishes, its stream never
/// repeats or loses text across the preemption, and the pool is empty after.
#[test]
fn a_full_kv_pool_preempts_and_resumes_without_losing_text() {
    let path = glassbox_models::smollm2_path(&models());
    let ask = |i: usize| GenerateRequest {
        max_tokens: 40,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![ChatMessage::user(format!(
            "Count from {i}0 to {i}99, one number per line."
        ))])
    };
    // The prompts' cells: the pool admits all four prompts, not their answers.
    let probe = llm()
        .render_prompt_blocking(ask(1).messages)
        .and_then(|p| llm().tokenize_blocking(&p, true))
        .unwrap();
    let cells = 4 * (probe.len() + 2) + 48;
    let options = LlmOptions {
        threads: Some(1),
        n_ctx: 512,
        max_num_seqs: 4,
        kv_cache_cells: Some(cells as u32),
        ..LlmOptions::new(path)
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2 with a small KV pool");
    let readers: Vec<_> = (1..=4)
        .map(|i| {
            let mut stream = h.stream(ask(i)).unwrap();
            std::thread::spawn(move || {
                let mut streamed = String::new();
                while let Some(piece) = stream.next_blocking() {
                    streamed.push_str(&piece);
                }
                (streamed, stream.finish_blocking())
            })
        })
        .collect();
    let results = readers.into_iter().map(|r| r.join().unwrap());
    let mut preempted = 0;
    for (streamed, done) in results {
        let c = done.expect("a preempted request still finishes");
        assert_eq!(streamed, c.text, "the stream repeated or lost text");
        assert!(c.usage.completion_tokens > 0, "{c:?}");
        preempted += c.preemptions;
    }
    // The gauges are published just after the last reply.
    let idle = eventually(std::time::Duration::from_secs(30), || {
        let load = h.engine_load();
        (load.running, load.waiting, load.kv_reserved) == (0, 0, 0)
    });
    let load = h.engine_load();
    assert!(idle, "{load:?}");
    assert!(
        preempted > 0 && load.preemptions >= u64::from(preempted),
        "{load:?}"
    );
}

/// With a KV pool that holds two prompts but not both answers, an online
/// request that arrives after an offline one is not the one preempted (the
/// newest would be, between equals): the offline request gives up its KV,
/// resumes once the online one is done, and loses no text.
#[test]
fn a_full_kv_pool_preempts_the_offline_request_before_a_newer_online_one() {
    let _turn = turn();
    let path = glassbox_models::smollm2_path(&models());
    // llama.cpp rounds a context up to 256 cells: a pool of 256 admits two
    // prompts of about 110 tokens, and runs out when they have generated
    // a dozen tokens each.
    const CELLS: usize = 256;
    let text =
        |i: usize, filler: &str| format!("Count from {i}0 to {i}99, one number per line.{filler}");
    let mut filler = String::new();
    let tokens = |t: &str| {
        llm()
            .render_prompt_blocking(vec![ChatMessage::user(t)])
            .and_then(|p| llm().tokenize_blocking(&p, true))
            .unwrap()
            .len()
    };
    while tokens(&text(1, &filler)) < CELLS * 43 / 100 {
        filler.push_str(" Please be exact.");
    }
    let ask = |i: usize, priority: i32| GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        priority,
        ..GenerateRequest::chat(vec![ChatMessage::user(text(i, &filler))])
    };
    let options = LlmOptions {
        threads: Some(1),
        n_ctx: 512,
        max_num_seqs: 2,
        kv_cache_cells: Some(CELLS as u32),
        ..LlmOptions::new(path)
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2 with a small KV pool");
    assert_eq!(h.info().kv_cells as usize, CELLS, "{:?}", h.info());
    // Offline (1) first, online (0) second: the online one is the newest.
    let readers: Vec<_> = [(1, 1), (2, 0)]
        .into_iter()
        .map(|(i, priority)| {
            let mut stream = h.stream(ask(i, priority)).unwrap();
            std::thread::spawn(move || {
                let mut streamed = String::new();
                while let Some(piece) = stream.next_blocking() {
                    streamed.push_str(&piece);
                }
                (streamed, stream.finish_blocking())
            })
        })
        .collect();
    let mut preemptions = Vec::new();
    for r in readers {
        let (streamed, done) = r.join().unwrap();
        let c = done.expect("both requests finish");
        assert_eq!(streamed, c.text, "the stream repeated or lost text");
        assert!(c.usage.completion_tokens > 0, "{c:?}");
        preemptions.push(c.preemptions);
    }
    assert!(
        preemptions[0] > 0 && preemptions[1] == 0,
        "offline, then online preemptions: {preemptions:?}"
    );
}
