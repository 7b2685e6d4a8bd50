//! `template` at run time: a Jinja template (minijinja) over `input` and
//! `outputs`, strict about undefined variables so a typo fails loudly
//! instead of rendering an empty prompt (the seeds' "prompt silently
//! truncated" black box).
//!
//! Output: `{"text": <rendered>, "template_id": <id>}`, or, with
//! `output: json`, the rendered text parsed as JSON.

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput};
use minijinja::{Environment, UndefinedBehavior};
use serde_json::json;

use super::config::{Output, TemplateConfig};

/// A built template.
pub struct TemplateNode {
    env: Environment<'static>,
    template_id: String,
    json_output: bool,
}

/// Compiles the template (once, here: a template that does not compile
/// fails the build, not a request).
pub(super) fn build(node_id: &str, config: &TemplateConfig) -> Result<TemplateNode, BuildError> {
    let source = config
        .template
        .as_deref()
        .ok_or_else(|| BuildError::config("`template` is missing"))?;
    let template_id = config.template_id.as_deref().unwrap_or(node_id).to_string();
    let json_output = match &config.output {
        Output::Text => false,
        Output::Json => true,
        Output::Other(other) => {
            return Err(BuildError::config(format!(
                "`output` is `{other}`; expected `text` or `json`"
            )));
        }
    };
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_template_owned(template_id.clone(), source.to_string())
        .map_err(|e| {
            BuildError::config(format!("template `{template_id}` does not compile: {e}"))
        })?;
    Ok(TemplateNode {
        env,
        template_id,
        json_output,
    })
}

impl TemplateNode {
    fn render(&self, cx: &NodeCx) -> Result<NodeOutput, NodeError> {
        let template = self
            .env
            .get_template(&self.template_id)
            .map_err(|e| NodeError::failed(e.to_string()))?;
        let ctx = minijinja::context! {
            input => minijinja::Value::from_serialize(cx.input()),
            outputs => minijinja::Value::from_serialize(cx.outputs_json()),
            labels => minijinja::Value::from_serialize(cx.labels_json()),
        };
        let text = template.render(ctx).map_err(|e| {
            NodeError::BadInput(format!(
                "template `{}` failed to render: {e}",
                self.template_id
            ))
        })?;
        let value = if self.json_output {
            serde_json::from_str(&text).map_err(|e| {
                NodeError::BadInput(format!(
                    "template `{}` did not render JSON: {e}",
                    self.template_id
                ))
            })?
        } else {
            json!({ "text": text, "template_id": self.template_id })
        };
        Ok(NodeOutput::new(value)
            .tag("template_id", self.template_id.clone())
            .fact(Fact::Templated {
                template_id: self.template_id.clone(),
            }))
    }
}

impl Node for TemplateNode {
    fn call(&self, cx: NodeCx) -> Call {
        Call::Ready(self.render(&cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> TemplateConfig {
        crate::check::typed(&super::super::Template, yaml)
    }

    #[test]
    fn bad_templates_fail_at_build() {
        assert!(build("p", &config("template: '{{ unclosed'")).is_err());
        assert!(build("p", &config("{template: x, output: yaml}")).is_err());
        assert_eq!(
            build("p", &config("template: x"))
                .map(|t| t.template_id)
                .ok(),
            Some("p".into())
        );
    }
}
