//! The `template` config, read once.

use glassbox_topology::{Code, Cx, Diagnostic, Value};

use crate::check;

pub const FIELDS: &[&str] = &["template", "template_id", "output", "chunk_order"];

/// What a template's rendered text becomes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Output {
    /// `{"text": ..., "template_id": ...}`.
    #[default]
    Text,
    /// The rendered text parsed as JSON.
    Json,
    /// A value that is neither (reported when the node is built).
    Other(String),
}

/// The order retrieved chunks (the `hits` of an upstream `vector_search`)
/// are in when the template sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChunkOrder {
    /// As retrieved, best score first (the prompt is what it always was).
    #[default]
    Retrieved,
    /// By document id, then chunk id: the same chunks make the same text
    /// whatever order the search returned them in, so prompts that share
    /// chunks share a longer prefix and the LLM's prefix cache reuses more
    /// of their KV.
    Canonical,
}

/// A checked `template` config.
#[derive(Debug, Clone, Default)]
pub struct TemplateConfig {
    /// Required; absent in a sketch (a node without `config`).
    pub template: Option<String>,
    /// Defaults to the node id.
    pub template_id: Option<String>,
    pub output: Output,
    pub chunk_order: ChunkOrder,
}

pub fn check(config: Option<&Value>, cx: &mut Cx<'_>) -> TemplateConfig {
    let mut out = TemplateConfig::default();
    let Some(obj) = check::config(config, cx) else {
        return out;
    };
    obj.deny_unknown(cx, FIELDS);
    if let Some(t) = obj.str(cx, "template") {
        if t.value.trim().is_empty() {
            cx.report(
                Diagnostic::error(Code::BadConfig, t.span, "`template` is empty")
                    .at(cx.path_of("template"))
                    .hint("write the prompt, e.g. `Answer: {{ input.question }}`"),
            );
        }
        out.template = Some(t.value);
    }
    out.template_id = obj.str(cx, "template_id").map(|t| t.value);
    out.output = match obj.str(cx, "output").map(|o| o.value) {
        None => Output::Text,
        Some(o) if o == "text" => Output::Text,
        Some(o) if o == "json" => Output::Json,
        Some(other) => Output::Other(other),
    };
    if let Some(o) = obj.str(cx, "chunk_order") {
        out.chunk_order = match o.value.as_str() {
            "retrieved" => ChunkOrder::Retrieved,
            "canonical" => ChunkOrder::Canonical,
            other => {
                cx.report(
                    Diagnostic::error(
                        Code::BadConfig,
                        o.span,
                        format!("`chunk_order` is `{other}`"),
                    )
                    .at(cx.path_of("chunk_order"))
                    .hint("use `retrieved` (the default) or `canonical`"),
                );
                ChunkOrder::Retrieved
            }
        };
    }
    out
}
