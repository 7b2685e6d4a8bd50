//! `embedding`: turns text into a vector (local MiniLM or an OpenAI-compatible server).

use glassbox_topology::{Cx, KindSchema, Value};

use crate::check;

pub const FIELDS: &[&str] = &[
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "allow_hosts",
    "text",
    "batch_size",
    "timeout_ms",
];

/// The `embedding` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Embedding;

impl KindSchema for Embedding {
    fn name(&self) -> &'static str {
        "embedding"
    }

    fn summary(&self) -> &'static str {
        "embeds text with a local BERT-family model or an OpenAI-compatible `/v1/embeddings`"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let Some(obj) = check::config(config, cx) else {
            return;
        };
        obj.deny_unknown(cx, FIELDS);
        check::backend(&obj, cx);
        obj.str(cx, "model");
        obj.str_list(cx, "allow_hosts");
        if let Some(text) = obj.str(cx, "text") {
            let path = cx.path_of("text");
            check::expr(&text, cx, &path);
        }
        obj.uint(cx, "batch_size", 1, 4096);
        obj.uint(cx, "timeout_ms", 1, 3_600_000);
    }
}
