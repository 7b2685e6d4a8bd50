//! `agent`: a model with tools, looping model call → tool call →
//! observation until it answers or a budget runs out ([`run`]). Tools are
//! topology files (sub-topologies beside this one) or `http` calls, each
//! described by a JSON Schema for its arguments ([`config`]). The loop is
//! always bounded: `max_iterations` is required, and token, cost and time
//! budgets may be added ([`budget`]). A tool call the model already made
//! in the run is not run again by default: the model is asked to answer
//! from the earlier result ([`repeat`]). With `tool_retrieval`, each run
//! is offered only the tools closest to its question ([`pick`]).

pub mod budget;
pub mod config;
pub mod offer;
pub mod pick;
pub mod repeat;
pub mod run;
pub mod tool;

use std::sync::Arc;

use glassbox_engine::{BuildError, Node, TypedKind};
use glassbox_topology::{Cx, Labels, Value};

use crate::resources::{BuildContext, Resources};

pub use config::AgentConfig;

/// The `agent` kind.
#[derive(Debug, Default, Clone, Copy)]
pub struct Agent;

impl TypedKind<Resources> for Agent {
    type Config = AgentConfig;

    fn name(&self) -> &'static str {
        "agent"
    }

    fn summary(&self) -> &'static str {
        "a model with tools (sub-topologies, http calls) in a bounded loop until it answers"
    }

    fn check(&self, config: Option<&Value>, cx: &mut Cx<'_>) -> AgentConfig {
        config::check(config, cx)
    }

    /// `answered`, or `budget_exhausted` when a budget stopped the loop;
    /// with `on_repeat: stop`, `repeated_call` when a repeated tool call
    /// did.
    fn labels(&self, config: &AgentConfig) -> Labels {
        let mut labels = vec!["answered".into(), "budget_exhausted".into()];
        if config.on_repeat == repeat::OnRepeat::Stop {
            labels.push("repeated_call".into());
        }
        Labels::Declared(labels)
    }

    fn build(
        &self,
        config: &AgentConfig,
        node: &glassbox_topology::Node,
        cx: &BuildContext,
    ) -> Result<Arc<dyn Node>, BuildError> {
        run::build(config, node, cx)
    }
}
