//! `template`: renders a prompt from the request input and upstream outputs.

use glassbox_topology::{Code, Cx, Diagnostic, KindSchema, Value};

use crate::check;

pub const FIELDS: &[&str] = &["template", "template_id", "output"];

/// The `template` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Template;

impl KindSchema for Template {
    fn name(&self) -> &'static str {
        "template"
    }

    fn summary(&self) -> &'static str {
        "renders a Jinja template over `input` and `outputs` (strict about undefined variables)"
    }

    fn check_config(&self, config: Option<&Value>, cx: &mut Cx<'_>) {
        let Some(obj) = check::config(config, cx) else {
            return;
        };
        obj.deny_unknown(cx, FIELDS);
        if let Some(t) = obj.str(cx, "template")
            && t.value.trim().is_empty()
        {
            cx.report(
                Diagnostic::error(Code::BadConfig, t.span, "`template` is empty")
                    .at(cx.path_of("template"))
                    .hint("write the prompt, e.g. `Answer: {{ input.question }}`"),
            );
        }
        obj.str(cx, "template_id");
        obj.str(cx, "output");
    }
}
