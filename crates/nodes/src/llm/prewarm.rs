//! `chunk_prewarm`: fills the per-chunk KV cache (`kv_reuse: chunks`, ADR
//! 0013) from a vector index when the node is built, so that a chunk's KV
//! is computed once before any question retrieves it (the idea of
//! TurboRAG's offline chunk caches) rather than by the first request
//! that quotes it.
//!
//! Each chunk of the index is framed by the config's `prompt` (a Jinja
//! template over `chunk`: the text the `template` node around the
//! retrieval quotes it in) and sent as one request of a single token with
//! the node's system message, naming the chunk, so the engine evaluates
//! and saves it exactly as it saves a chunk a real request quotes. What
//! decides whether a later request finds it is the chunk's tokens, so the
//! frame only has to put the same text right before and after the chunk
//! that the real prompt does.

use glassbox_engine::BuildError;
use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, PromptChunk};
use glassbox_topology::{Code, Cx, Obj};
use minijinja::{Environment, UndefinedBehavior};
use serde_json::json;

use crate::resources::BuildContext;

const FIELDS: &[&str] = &["index", "prompt"];

/// A checked `chunk_prewarm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPrewarm {
    /// The index directory (`glassbox index build`), relative to the
    /// topology file.
    pub index: String,
    /// The user message around one chunk: a template over `chunk` (`text`,
    /// `id`, `title`, `doc_id`).
    pub prompt: String,
}

/// Reads `chunk_prewarm` of `obj`: it needs `kv_reuse: chunks` (there is
/// no chunk cache to fill otherwise) and a local model.
pub(super) fn check(
    obj: &Obj<'_>,
    cx: &mut Cx<'_>,
    kv_chunks: bool,
    local: bool,
) -> Option<ChunkPrewarm> {
    let span = obj.get("chunk_prewarm")?.span;
    let inner = obj.obj(cx, "chunk_prewarm")?;
    let mut cx = cx.field("chunk_prewarm");
    inner.deny_unknown(&mut cx, FIELDS);
    let index = inner.req_str(
        &mut cx,
        "index",
        "name the index the `vector_search` node reads, e.g. `index: kb.index`",
    );
    let prompt = inner.req_str(
        &mut cx,
        "prompt",
        "frame one chunk as the prompt quotes a retrieved note, e.g. `prompt: \"Note: {{ chunk.text }}\\n\"`",
    );
    if let Some(p) = &prompt {
        match strict().template_from_str(&p.value) {
            Err(e) => cx.error(
                Code::BadConfig,
                p.span,
                format!("`prompt` does not compile: {e}"),
                "write a Jinja template over `chunk`, e.g. `Note: {{ chunk.text }}`",
            ),
            Ok(t) if !t.undeclared_variables(false).contains("chunk") => cx.error(
                Code::BadConfig,
                p.span,
                "`prompt` does not quote the chunk",
                "put `{{ chunk.text }}` where the prompt template puts a retrieved note's text",
            ),
            Ok(_) => {}
        }
    }
    if !kv_chunks {
        cx.error(
            Code::BadConfig,
            span,
            "`chunk_prewarm` fills the per-chunk KV cache, which only `kv_reuse: chunks` keeps",
            "add `kv_reuse: chunks`, or remove `chunk_prewarm`",
        );
    }
    if !local {
        cx.error(
            Code::BadConfig,
            span,
            "`chunk_prewarm` needs the local engine (`backend: local`)",
            "remove `chunk_prewarm`: a remote server keeps its own caches",
        );
    }
    Some(ChunkPrewarm {
        index: index?.value,
        prompt: prompt?.value,
    })
}

/// Sends every chunk of the prewarm's index through `handle`, one at a
/// time, on a thread of its own (the engine's replies are awaited
/// blockingly, which an async runtime's threads may not do).
pub(super) fn run(
    handle: &LlmHandle,
    prewarm: &ChunkPrewarm,
    system: Option<&str>,
    cx: &BuildContext,
) -> Result<(), BuildError> {
    let path = cx.topology.resolve_path(&prewarm.index);
    let index = cx.resources.models().index(&path)?;
    let env = strict();
    let template = env
        .template_from_str(&prewarm.prompt)
        .map_err(|e| BuildError::config(format!("`chunk_prewarm.prompt` does not compile: {e}")))?;
    let mut requests = Vec::with_capacity(index.len());
    for chunk in index.chunks() {
        let user = template
            .render(json!({ "chunk": {
                "text": chunk.text, "id": chunk.id, "title": chunk.title, "doc_id": chunk.doc_id,
            }}))
            .map_err(|e| {
                BuildError::config(format!(
                    "`chunk_prewarm.prompt` does not render for chunk `{}`: {e}",
                    chunk.id
                ))
            })?;
        let mut messages: Vec<ChatMessage> = system.map(ChatMessage::system).into_iter().collect();
        messages.push(ChatMessage::user(user));
        requests.push(GenerateRequest {
            max_tokens: 1,
            temperature: 0.0,
            // The offline band: a request arriving meanwhile goes first.
            priority: 1,
            chunks: vec![PromptChunk {
                id: chunk.id.clone(),
                text: chunk.text.clone(),
            }],
            ..GenerateRequest::chat(messages)
        });
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            requests
                .into_iter()
                .try_for_each(|r| handle.generate_blocking(r).map(drop))
        })
        .join()
    })
    .map_err(|_| BuildError::config("the chunk prewarm's thread panicked"))?
    .map_err(|e| {
        BuildError::config(format!(
            "prewarming the chunks of `{}`: {e}",
            path.display()
        ))
    })
}

/// The trace tag of a request to a `prewarmed` node that quoted `quoted`
/// retrieved chunks yet placed none of them from the chunk cache, though
/// most of its prompt was not served from the prefix cache either: the
/// sign that the prewarm did not save what real prompts look up (a frame
/// that changes a chunk's text or the characters right around it), or that
/// the cache is too small to hold the index. `None` when nothing is amiss.
pub(super) fn missed(
    prewarmed: bool,
    quoted: usize,
    c: &glassbox_models::Completion,
) -> Option<String> {
    let mostly_fresh = u64::from(c.prompt_cached_tokens) * 2 < u64::from(c.usage.prompt_tokens);
    (prewarmed && quoted >= 2 && c.prompt_placed_tokens == 0 && mostly_fresh).then(|| {
        format!(
            "none of the {quoted} quoted chunks came from the prewarmed cache: check that \
             `chunk_prewarm.prompt` puts `{{{{ chunk.text }}}}` unchanged between the same text \
             as the prompt template, and that `chunk_cache_mib` holds the whole index"
        )
    })
}

/// A Jinja environment strict about undefined variables, with the
/// `template` kind's CPU budget per render (a topology's author is not
/// trusted to write loops that end): the node's own `prompt` and the
/// prewarm's frame render in one.
pub(super) fn strict() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_fuel(Some(crate::template::run::FUEL));
    env
}

#[cfg(test)]
mod tests {
    use glassbox_topology::Cx;

    use super::super::config;

    fn diagnostics(yaml: &str) -> Vec<String> {
        let source = glassbox_topology::Source::new("config.yaml", yaml);
        let value = glassbox_topology::parse::parse(&source).unwrap_or_else(|d| panic!("{d:?}"));
        let mut diagnostics = Vec::new();
        config::check(Some(&value), &mut Cx::new(&mut diagnostics));
        diagnostics.iter().map(|d| format!("{d:?}")).collect()
    }

    #[test]
    fn a_prewarm_is_read_with_chunk_reuse_and_refused_without() {
        let ok = "kv_reuse: chunks\nchunk_prewarm: { index: kb.index, prompt: \"Note: {{ chunk.text }}\" }";
        assert!(diagnostics(ok).is_empty(), "{:?}", diagnostics(ok));
        let without = "chunk_prewarm: { index: kb.index, prompt: \"Note: {{ chunk.text }}\" }";
        let d = diagnostics(without);
        assert!(d.len() == 1 && d[0].contains("kv_reuse: chunks"), "{d:?}");
    }

    #[test]
    fn a_prewarm_prompt_must_quote_the_chunk_and_both_fields_are_required() {
        let d =
            diagnostics("kv_reuse: chunks\nchunk_prewarm: { index: kb.index, prompt: \"Note:\" }");
        assert!(
            d.len() == 1 && d[0].contains("does not quote the chunk"),
            "{d:?}"
        );
        let d = diagnostics("kv_reuse: chunks\nchunk_prewarm: { prompt: \"{{ chunk.text }}\" }");
        assert!(d.len() == 1 && d[0].contains("`index`"), "{d:?}");
        let d = diagnostics(
            "kv_reuse: chunks\nchunk_prewarm: { index: kb.index, prompt: \"{{ chunk.text \" }",
        );
        assert!(d.len() == 1 && d[0].contains("does not compile"), "{d:?}");
    }
}
