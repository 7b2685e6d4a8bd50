//! What an agent's model is offered in a run: every tool, or with
//! `tool_retrieval` the tools closest to the run's question
//! ([`super::pick`]), each offer with the plans (grammars and
//! instructions) of a call that may answer or call, and of one that must
//! call a tool (`tool_first`). Offers are kept by the set of tools they
//! hold, so a set's grammar is built once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use glassbox_engine::{NodeError, Step as StepSpan};
use serde_json::{Value, json};

use super::pick::ToolIndex;
use crate::llm::tools::{Ask, LocalPlan};

/// A run's `tool_retrieval`: its step, its span and its explanation.
pub(super) struct Retrieved {
    pub step: Value,
    pub span: StepSpan,
    pub note: (String, String),
}

/// The tools one run offers its model: the ask and its local plan.
pub(super) struct Offer {
    pub ask: Ask,
    pub plan: LocalPlan,
    /// The plan of a call that must call one of the tools (`tool_first`).
    pub tool_plan: LocalPlan,
}

impl Offer {
    pub fn new(ask: Ask) -> Result<Offer, String> {
        let plan = ask.local_plan()?;
        let tool_plan = Ask {
            choice: crate::llm::tools::Choice::Required,
            ..ask.clone()
        }
        .local_plan()?;
        Ok(Offer {
            ask,
            plan,
            tool_plan,
        })
    }
}

/// What a model call may reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum May {
    /// Call a tool or answer.
    Either,
    /// Only answer (after a repeated call).
    Answer,
    /// Only call a tool (the first call with `tool_first`).
    CallTool,
}

/// Every tool's offer, and with `tool_retrieval` the offers by the set of
/// tools retrieved.
pub(super) struct Offers {
    all: Arc<Offer>,
    retrieval: Option<ToolIndex>,
    by_tools: Mutex<HashMap<Vec<String>, Arc<Offer>>>,
    /// The tools' names in the topology's order.
    declared: Vec<String>,
}

impl Offers {
    pub fn new(all: Offer, retrieval: Option<ToolIndex>, declared: Vec<String>) -> Offers {
        Offers {
            all: Arc::new(all),
            retrieval,
            by_tools: Mutex::new(HashMap::new()),
            declared,
        }
    }

    /// The tools this run offers: all of them, or with `tool_retrieval`
    /// those closest to the question, with the span and the note that
    /// say so.
    pub(super) fn for_question(
        &self,
        question: &str,
    ) -> Result<(Arc<Offer>, Option<Retrieved>), NodeError> {
        let Some(index) = &self.retrieval else {
            return Ok((self.all.clone(), None));
        };
        let started = Instant::now();
        let picked = index
            .pick(question)
            .map_err(|e| NodeError::failed(format!("`tool_retrieval`: {e}")))?;
        let names = picked.names_in(&self.declared);
        let offer = {
            let mut offers = self.by_tools.lock().unwrap_or_else(|e| e.into_inner());
            match offers.get(&names) {
                Some(o) => o.clone(),
                None => {
                    let ask = self.all.ask.only(&names);
                    let o = Arc::new(Offer::new(ask).map_err(NodeError::failed)?);
                    offers.insert(names.clone(), o.clone());
                    o
                }
            }
        };
        let scores = |s: &[super::pick::Score]| -> Value {
            s.iter()
                .map(|s| json!({"tool": s.tool, "similarity": s.similarity}))
                .collect()
        };
        let (en, zh) = picked.explain(index.model());
        let step = json!({
            "kind": "pick", "offered": scores(&picked.offered),
            "left_out": scores(&picked.left_out), "cost": 0.0,
            "ms": started.elapsed().as_secs_f64() * 1e3,
        });
        let span = StepSpan {
            kind: "pick",
            name: index.model().to_string(),
            iteration: 1,
            started,
            ended: Instant::now(),
            input: json!(question),
            output: json!({"offered": step["offered"], "left_out": step["left_out"]}),
            error: None,
            tokens: None,
            cost: None,
        };
        Ok((
            offer,
            Some(Retrieved {
                step,
                span,
                note: (en, zh),
            }),
        ))
    }
}
