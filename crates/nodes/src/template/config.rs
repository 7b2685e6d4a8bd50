//! The `template` config, read once.

use glassbox_topology::{Code, Cx, Diagnostic, Value};

use crate::check;

pub const FIELDS: &[&str] = &["template", "template_id", "output"];

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

/// A checked `template` config.
#[derive(Debug, Clone, Default)]
pub struct TemplateConfig {
    /// Required; absent in a sketch (a node without `config`).
    pub template: Option<String>,
    /// Defaults to the node id.
    pub template_id: Option<String>,
    pub output: Output,
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
    out
}
