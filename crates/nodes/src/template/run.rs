//! `template` at run time: a Jinja template (minijinja) over `input` and
//! `outputs`, strict about undefined variables so a typo fails loudly
//! instead of rendering an empty prompt (the seeds' "prompt silently
//! truncated" black box).
//!
//! Output: `{"text": <rendered>, "template_id": <id>}`, or, with
//! `output: json`, the rendered text parsed as JSON.
//!
//! With `chunk_order: canonical` the `hits` of every upstream output (what
//! `vector_search` returns) are sorted by document and chunk id before the
//! template sees them, and the span lists them (`chunks`): the same
//! retrieved chunks then render to the same text in any order the search
//! ranked them, which is what lets an LLM's prefix cache reuse their KV.
//! The default (`retrieved`) leaves them as ranked: the prompt is the same
//! text it always was.
//!
//! A template is code a topology author wrote, run on the server's CPU, so
//! it runs under budgets (issue 33: two nested `range(100000)` loops held
//! two threads at 100% for good and stalled every template on the server):
//!
//! - it renders on the blocking pool ([`Call::Blocking`]), never on an
//!   async worker, so a slow render delays nobody else's request;
//! - every render gets [`FUEL`] (minijinja counts one unit per
//!   instruction) and may write at most [`MAX_OUTPUT_BYTES`];
//! - it stops once the engine stops waiting (the node's timeout, the
//!   request's deadline, a cancelled request): `range` and every write
//!   check the attempt first. minijinja has no other hook, so a builtin
//!   filter already running finishes its (bounded) list before the check.

use std::cell::RefCell;
use std::io::Write;

use glassbox_engine::trace::Fact;
use glassbox_engine::{BuildError, Call, Node, NodeCx, NodeError, NodeOutput};
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::json;

use super::config::{ChunkOrder, Output, TemplateConfig};

/// Instructions one render may execute: about a hundred times what a large
/// prompt (a loop over dozens of retrieved documents) takes, and a fraction
/// of a second of CPU.
pub const FUEL: u64 = 2_000_000;

/// The most text one render may produce (a prompt far beyond any model's
/// context).
pub const MAX_OUTPUT_BYTES: usize = 4 << 20;

thread_local! {
    /// The attempt being rendered on this thread, so `range` and the
    /// writer can see whether the engine still waits for it.
    static ATTEMPT: RefCell<Option<NodeCx>> = const { RefCell::new(None) };
}

fn attempt_over() -> bool {
    ATTEMPT.with(|a| a.borrow().as_ref().is_some_and(NodeCx::attempt_over))
}

const STOPPED: &str = "stopped: the node's timeout or the request's deadline passed";

/// minijinja's `range`, checking first that the attempt is still wanted.
fn range(
    lower: isize,
    upper: Option<isize>,
    step: Option<isize>,
) -> Result<minijinja::Value, minijinja::Error> {
    if attempt_over() {
        return Err(minijinja::Error::new(ErrorKind::InvalidOperation, STOPPED));
    }
    minijinja::functions::range(lower, upper, step)
}

/// Collects the rendered text up to [`MAX_OUTPUT_BYTES`], and stops the
/// render once the attempt is over.
#[derive(Default)]
struct Bounded {
    text: Vec<u8>,
    over: Option<&'static str>,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if attempt_over() {
            self.over = Some(STOPPED);
        } else if self.text.len() + buf.len() > MAX_OUTPUT_BYTES {
            self.over = Some("output budget spent: the text would exceed 4 MiB");
        }
        if let Some(why) = self.over {
            return Err(std::io::Error::other(why));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A built template.
pub struct TemplateNode {
    env: std::sync::Arc<Environment<'static>>,
    template_id: String,
    json_output: bool,
    chunk_order: ChunkOrder,
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
    env.set_fuel(Some(FUEL));
    env.add_function("range", range);
    env.add_template_owned(template_id.clone(), source.to_string())
        .map_err(|e| {
            BuildError::config(format!("template `{template_id}` does not compile: {e}"))
        })?;
    Ok(TemplateNode {
        env: std::sync::Arc::new(env),
        template_id,
        json_output,
        chunk_order: config.chunk_order,
    })
}

/// Sorts the `hits` of every upstream output by document id, then chunk
/// id (hits without them keep their place relative to each other, after
/// those with them). Returns the chunk ids in their new order.
fn canonical_hits(outputs: &mut serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let key = |hit: &serde_json::Value| {
        let field = |name| hit.get(name).and_then(serde_json::Value::as_str);
        (
            field("doc_id").is_none(),
            field("doc_id").map(str::to_owned),
            chunk_key(field("chunk_id")),
        )
    };
    let mut ids = Vec::new();
    for out in outputs.values_mut() {
        let Some(hits) = out
            .get_mut("hits")
            .and_then(serde_json::Value::as_array_mut)
        else {
            continue;
        };
        hits.sort_by_cached_key(key);
        ids.extend(hits.iter().filter_map(|h| {
            h.get("chunk_id")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        }));
    }
    ids
}

/// The retrieved chunks (`hits` of upstream outputs) the rendered `text`
/// quotes, as `{"id", "text"}` in the order they appear: where an LLM
/// node's per-chunk KV reuse finds them in its prompt.
fn quoted_chunks(
    outputs: &serde_json::Map<String, serde_json::Value>,
    text: &str,
) -> Vec<serde_json::Value> {
    let mut quoted: Vec<(usize, serde_json::Value)> = outputs
        .values()
        .filter_map(|out| out.get("hits").and_then(serde_json::Value::as_array))
        .flatten()
        .filter_map(|hit| {
            let chunk = hit.get("text")?.as_str().filter(|t| !t.is_empty())?;
            let at = text.find(chunk)?;
            let id = hit
                .get("chunk_id")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            Some((at, json!({ "id": id, "text": chunk })))
        })
        .collect();
    quoted.sort_by_key(|(at, _)| *at);
    quoted.into_iter().map(|(_, c)| c).collect()
}

/// A chunk id's sort key: `doc#12` after `doc#2` (the index's ids end in
/// the chunk's number), any other id as text.
fn chunk_key(id: Option<&str>) -> (String, u64) {
    let Some(id) = id else {
        return (String::new(), 0);
    };
    match id.rsplit_once('#') {
        Some((doc, n)) if n.parse::<u64>().is_ok() => (doc.to_owned(), n.parse().unwrap_or(0)),
        _ => (id.to_owned(), 0),
    }
}

/// One render, on the thread that calls it (a blocking-pool thread).
fn render(
    env: &Environment<'static>,
    template_id: &str,
    json_output: bool,
    chunk_order: ChunkOrder,
    cx: &NodeCx,
) -> Result<NodeOutput, NodeError> {
    let template = env
        .get_template(template_id)
        .map_err(|e| NodeError::failed(e.to_string()))?;
    let mut outputs = cx.outputs_json();
    let chunks = match chunk_order {
        ChunkOrder::Retrieved => None,
        ChunkOrder::Canonical => Some(canonical_hits(&mut outputs)),
    };
    let ctx = minijinja::context! {
        input => minijinja::Value::from_serialize(cx.input()),
        outputs => minijinja::Value::from_serialize(&outputs),
        labels => minijinja::Value::from_serialize(cx.labels_json()),
    };
    ATTEMPT.with(|a| *a.borrow_mut() = Some(cx.clone()));
    let mut out = Bounded::default();
    let rendered = template.render_captured_to(ctx, &mut out).map(drop);
    ATTEMPT.with(|a| *a.borrow_mut() = None);
    if let Err(e) = rendered {
        let why = match (out.over, e.kind()) {
            (Some(why), _) => why.to_string(),
            (None, ErrorKind::OutOfFuel) => format!(
                "CPU budget spent: the template ran more than {FUEL} instructions (a loop too large for a prompt?)"
            ),
            _ => e.to_string(),
        };
        return Err(NodeError::BadInput(format!(
            "template `{template_id}` failed to render: {why}"
        )));
    }
    let text = String::from_utf8(out.text)
        .map_err(|e| NodeError::failed(format!("template `{template_id}`: {e}")))?;
    let value = if json_output {
        serde_json::from_str(&text).map_err(|e| {
            NodeError::BadInput(format!("template `{template_id}` did not render JSON: {e}"))
        })?
    } else {
        let quoted = quoted_chunks(&outputs, &text);
        let mut value = json!({ "text": text, "template_id": template_id });
        if !quoted.is_empty() {
            value["chunks"] = serde_json::Value::Array(quoted);
        }
        value
    };
    let mut out = NodeOutput::new(value).tag("template_id", template_id.to_string());
    if let Some(chunks) = chunks {
        out = out
            .tag("chunk_order", "canonical".to_string())
            .tag("chunks", chunks.join(","));
    }
    Ok(out.fact(Fact::Templated {
        template_id: template_id.to_string(),
    }))
}

impl Node for TemplateNode {
    fn call(&self, cx: NodeCx) -> Call {
        let env = self.env.clone();
        let template_id = self.template_id.clone();
        let json_output = self.json_output;
        let chunk_order = self.chunk_order;
        Call::blocking(move || render(&env, &template_id, json_output, chunk_order, &cx))
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
