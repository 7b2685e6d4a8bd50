//! What runs an agent's tool: a sub-topology (built once, with the same
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
            let depth = NESTING.with(std::cell::Cell::get);
            if depth >= MAX_NESTING {
                return Err(BuildError::config(format!(
                    "tool `{}`: topology `{file}` nests tool topologies more than \
                     {MAX_NESTING} deep (does it name itself?)",
                    t.name
                )));
            }
            let path = cx.topology.resolve_path(file);
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
            let assembled = crate::assemble::assemble(
                crate::assemble::TopologyInput::Path(path.display().to_string()),
                &with,
            );
            NESTING.with(|n| n.set(depth));
            let assembled = assembled.map_err(|e| {
                BuildError::config(format!(
                    "tool `{}`: topology `{file}` could not be built: {e}",
                    t.name
                ))
            })?;
            Runner::Topology(Arc::new(assembled.pipeline))
        }
    };
    Ok(Tool {
        name: t.name.clone(),
        runner,
    })
}

impl Tool {
    /// Runs the tool with `args`; blocking (the agent loop runs on the
    /// engine's blocking pool, inside its runtime).
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
