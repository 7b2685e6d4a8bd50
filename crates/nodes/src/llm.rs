//! `llm_inference`: text generation, local (GGUF via llama.cpp) or remote
//! (any OpenAI-compatible server).

use glassbox_topology::{Cx, KindSchema, Value};

use crate::check;

pub const FIELDS: &[&str] = &[
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "allow_hosts",
    "system",
    "prompt",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "threads",
    "context_size",
    "max_num_seqs",
];

/// The `llm_inference` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct LlmInference;

impl KindSchema for LlmInference {
    fn name(&self) -> &'static str {
        "llm_inference"
    }

    fn summary(&self) -> &'static str {
        "generates text with a local GGUF model (llama.cpp) or an OpenAI-compatible server"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let Some(obj) = check::config(config, cx) else {
            return;
        };
        obj.deny_unknown(cx, FIELDS);
        check::backend(&obj, cx);
        obj.str(cx, "model");
        obj.str_list(cx, "allow_hosts");
        obj.str(cx, "system");
        obj.str(cx, "prompt");
        obj.uint(cx, "max_tokens", 1, 131_072);
        obj.number(cx, "temperature", 0.0, 2.0);
        obj.number(cx, "top_p", 0.0, 1.0);
        obj.uint(cx, "seed", 0, u32::MAX as u64);
        obj.str_list(cx, "stop");
        obj.uint(cx, "threads", 1, 1024);
        obj.uint(cx, "context_size", 64, 1_048_576);
        obj.uint(cx, "max_num_seqs", 1, 256);
    }
}
