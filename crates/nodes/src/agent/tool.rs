//! What runs an agent's tool: a sub-topology (its own file, or written
//! inline in the agent's file; built once, with the same
//! kinds, models and outbound policy as the topology that holds it) or an
//! `http` call. Each call gives an observation (the text the model reads
//! next), the cost it ran up, and whether it failed.

use std::sync::Arc;

use glassbox_engine::{BuildError, Pipeline, PipelineOptions, RunOptions, text_of};
use serde_json::Value;

use super::config::{Runs, ToolConfig};
use crate::http::run::HttpNode;
use crate::resources::BuildContext;

/// Longest observation the model is shown, in characters.
pub const MAX_OBSERVATION: usize = 1500;

pub enum Runner {
    Topology(Arc<Pipeline>),
    Http(HttpNode),
}

/// A built tool.
pub struct Tool {
    pub name: String,
    pub runner: Runner,
    /// Arguments the runtime fills (`inject`), by parameter name.
    pub inject: Vec<(String, glassbox_topology::Expr)>,
}

/// One tool call's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub text: String,
    /// `receipt` as a float, for the budgets.
    pub cost: f64,
    /// The tool topology's receipt total, exact (zero for `http` tools).
    pub receipt: rust_decimal::Decimal,
    pub ok: bool,
}

/// How deep tool topologies may nest (an agent whose tool topology holds
/// an agent ...); deeper is a build error, so a file that names itself
/// cannot recurse forever.
const MAX_NESTING: usize = 4;

thread_local! {
    static NESTING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Builds a tool: assembles its topology file (relative to the agent's
/// topology) or its `http` client.
pub fn build(
    t: &ToolConfig,
    timeout: std::time::Duration,
    cx: &BuildContext,
) -> Result<Tool, BuildError> {
    let runner = match &t.runs {
        Runs::Http(h) => Runner::Http(crate::http::run::build(
            h,
            timeout,
            cx.resources.outbound(),
        )?),
        Runs::Topology(file) => {
            let path = cx.topology.resolve_path(file);
            let input = crate::assemble::TopologyInput::Path(path.display().to_string());
            Runner::Topology(Arc::new(sub_topology(t, &format!("`{file}`"), input, cx)?))
        }
        Runs::Inline(value) => {
            let source = inline_source(&cx.topology.source_name, value);
            let input = crate::assemble::TopologyInput::Source(source);
            Runner::Topology(Arc::new(sub_topology(t, "written inline", input, cx)?))
        }
    };
    Ok(Tool {
        name: t.name.clone(),
        runner,
        inject: t.inject.clone(),
    })
}

/// Validates and builds a tool's topology with the kinds, models and
/// outbound policy of the topology that holds it.
fn sub_topology(
    t: &ToolConfig,
    what: &str,
    input: crate::assemble::TopologyInput,
    cx: &BuildContext,
) -> Result<Pipeline, BuildError> {
    let depth = NESTING.with(std::cell::Cell::get);
    if depth >= MAX_NESTING {
        return Err(BuildError::config(format!(
            "tool `{}`: topology {what} nests tool topologies more than \
             {MAX_NESTING} deep (does it name itself?)",
            t.name
        )));
    }
    let registry = cx.resources.registry.as_ref().ok_or_else(|| {
        BuildError::config(format!(
            "tool `{}`: topology tools are built only by \
             `glassbox_nodes::assemble` (which knows the kinds)",
            t.name
        ))
    })?;
    let options = |_: &glassbox_topology::Topology, _: &glassbox_topology::Report| {
        Ok::<_, std::convert::Infallible>(PipelineOptions::default())
    };
    let with = crate::assemble::Assembly {
        registry,
        options: &options,
        outbound: cx.resources.outbound.clone(),
        models: cx.resources.models.clone(),
        cluster: None,
    };
    NESTING.with(|n| n.set(depth + 1));
    let assembled = crate::assemble::assemble(input, &with);
    NESTING.with(|n| n.set(depth));
    let assembled = assembled.map_err(|e| {
        // The diagnostics themselves (file:line:column), not only a count.
        let detail = match &e {
            crate::assemble::AssembleError::Topology(
                glassbox_topology::TopologyError::Invalid(report),
            ) => format!(":\n{}", report.render_without_source().trim_end()),
            _ => String::new(),
        };
        BuildError::config(format!(
            "tool `{}`: topology {what} could not be built: {e}{detail}",
            t.name
        ))
    })?;
    Ok(assembled.pipeline)
}

/// The source of a topology written inline under a tool's `topology` key.
/// When the file that holds it can be read, the source is that file with
/// everything outside the inline map blanked (line breaks kept), so every
/// diagnostic names the file's own line and column and relative paths
/// resolve beside it; otherwise the map as JSON.
fn inline_source(holder: &str, value: &glassbox_topology::Value) -> glassbox_topology::Source {
    let (start, end) = extent(value);
    let text = (!holder.starts_with('<'))
        .then(|| std::fs::read_to_string(holder).ok())
        .flatten()
        .filter(|text| end <= text.len() && text.is_char_boundary(start) && start < end);
    match text {
        Some(text) => {
            let blanked: String = text
                .char_indices()
                .map(|(i, c)| {
                    if (start..end).contains(&i) || c == '\n' || c == '\r' {
                        c
                    } else {
                        ' '
                    }
                })
                .collect();
            glassbox_topology::Source::new(holder, blanked)
        }
        None => glassbox_topology::Source::new(
            format!("{holder} (inline tool topology).json"),
            serde_json::to_string_pretty(&value.to_json()).unwrap_or_default(),
        ),
    }
}

/// The bytes a value was written over, its keys and children included.
fn extent(value: &glassbox_topology::Value) -> (usize, usize) {
    let mut span = (value.span.start, value.span.end);
    let mut widen = |(s, e): (usize, usize)| {
        span.0 = span.0.min(s);
        span.1 = span.1.max(e);
    };
    if let Some(map) = value.as_map() {
        for (key, v) in &map.entries {
            widen((key.span.start, key.span.end));
            widen(extent(v));
        }
    } else if let Some(items) = value.as_seq() {
        for v in items {
            widen(extent(v));
        }
    }
    span
}

impl Tool {
    /// Runs the tool with `args`; blocking (the agent loop runs on the
    /// engine's blocking pool, inside its runtime).
    /// Writes the injected arguments into `args` (the model's), each
    /// evaluated over the agent's `input` (a plain-text input reads as
    /// `{"question": TEXT}`), `outputs` and `labels`; the first that fails
    /// says why.
    pub fn inject(
        &self,
        args: &mut Value,
        input: &Value,
        outputs: &serde_json::Map<String, Value>,
        labels: &serde_json::Map<String, Value>,
    ) -> Result<(), String> {
        if self.inject.is_empty() {
            return Ok(());
        }
        let asked;
        let input = match input {
            Value::String(q) => {
                asked = serde_json::json!({ "question": q });
                &asked
            }
            other => other,
        };
        if !args.is_object() {
            *args = serde_json::json!({});
        }
        for (name, expr) in &self.inject {
            let value = expr
                .evaluate_string(input, outputs, labels)
                .map_err(|e| format!("`inject.{name}` of tool `{}`: {e}", self.name))?;
            args[name.as_str()] = Value::String(value);
        }
        Ok(())
    }

    pub fn call(&self, args: &Value) -> Observation {
        match &self.runner {
            Runner::Http(node) => match node.call_with(args) {
                Ok(out) => Observation {
                    text: shown(out.value.get("body").unwrap_or(&out.value)),
                    cost: 0.0,
                    receipt: rust_decimal::Decimal::ZERO,
                    ok: true,
                },
                Err(e) => failed(&e.to_string()),
            },
            Runner::Topology(pipeline) => {
                let Ok(rt) = tokio::runtime::Handle::try_current() else {
                    return failed("no runtime to run the tool's topology on");
                };
                let outcome = rt.block_on(pipeline.run(args.clone(), RunOptions::default()));
                let receipt = outcome.trace.record.receipt.total;
                let cost = receipt.to_string().parse::<f64>().unwrap_or(0.0);
                match &outcome.result {
                    Ok(v) => Observation {
                        text: shown(v),
                        cost,
                        receipt,
                        ok: true,
                    },
                    Err(e) => Observation {
                        cost,
                        receipt,
                        ..failed(&e.to_string())
                    },
                }
            }
        }
    }
}

fn failed(why: &str) -> Observation {
    Observation {
        text: format!("error: {why}"),
        cost: 0.0,
        receipt: rust_decimal::Decimal::ZERO,
        ok: false,
    }
}

/// A value as the model reads it: its text, else compact JSON, cut to
/// [`MAX_OBSERVATION`] characters.
pub fn shown(v: &Value) -> String {
    let text = match text_of(v) {
        Some(t) => t.to_string(),
        None => v.to_string(),
    };
    match text.char_indices().nth(MAX_OBSERVATION) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn observations_are_text_or_json_and_bounded() {
        assert_eq!(shown(&json!({"text": "found 2 orders"})), "found 2 orders");
        assert_eq!(
            shown(&json!({"status": "shipped"})),
            r#"{"status":"shipped"}"#
        );
        let long = "x".repeat(MAX_OBSERVATION + 10);
        assert_eq!(shown(&json!(long)).chars().count(), MAX_OBSERVATION + 1);
    }
}
