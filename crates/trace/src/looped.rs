//! Bounded loops as one request ran them: how many times each loop's body
//! ran, what each iteration did, and why the loop stopped.
//!
//! Stored in the path ([`PathRecord::loops`](crate::PathRecord::loops)),
//! so the explanation, the critical path and the diff can be computed
//! from a stored record. Each span of a node in a loop's body carries the
//! iteration it ran in as its [`ITERATION_TAG`](crate::ITERATION_TAG) tag; the receipt bills
//! the body iteration by iteration ([`ReceiptLine::iteration`](crate::ReceiptLine::iteration)).

use std::sync::Arc;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::fact::Lang;

/// One loop of the topology in one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopRun {
    /// The back edge: from the loop's last node back to its first.
    pub from: Arc<str>,
    pub to: Arc<str>,
    /// The body's nodes, in path order.
    pub body: Vec<Arc<str>>,
    pub max_iterations: u32,
    /// One entry per iteration that ran, first to last.
    pub iterations: Vec<IterationRun>,
    /// Why no further iteration ran.
    pub stopped: LoopStop,
}

/// One iteration of a loop's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRun {
    /// The body's nodes that ran in it, in the order they finished, each
    /// with the label it emitted.
    pub ran: Vec<RanNode>,
    /// Tokens (input + output) its nodes used.
    pub tokens: u64,
    /// What its nodes cost.
    pub cost: Decimal,
    /// Offsets from the request's start, in microseconds.
    pub start_us: u64,
    pub end_us: u64,
}

/// A node that ran in an iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanNode {
    pub node: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// Why a loop stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum LoopStop {
    /// The back edge was not taken: `why` is its reason (the condition
    /// with the values it read, the label emitted, or why its source did
    /// not run).
    Condition { why: String },
    /// The bound allowed no further iteration: `bound` is the field
    /// (`max_iterations`, `max_tokens`, `max_cost`, `max_time_ms`), with
    /// its limit and what the loop had spent, as written.
    Bound {
        bound: String,
        limit: String,
        spent: String,
    },
    /// The request ended (failed, cancelled, past its deadline) while an
    /// iteration ran.
    Ended,
}

impl LoopRun {
    /// Total tokens over all iterations.
    pub fn tokens(&self) -> u64 {
        self.iterations.iter().map(|i| i.tokens).sum()
    }

    /// Total cost over all iterations.
    pub fn cost(&self) -> Decimal {
        self.iterations
            .iter()
            .fold(Decimal::ZERO, |a, i| a.saturating_add(i.cost))
    }

    /// The sentence that tells how the loop ran and why it stopped:
    /// "The loop check → revise ran 3 times: …; it stopped because …".
    pub fn sentence(&self, lang: Lang) -> String {
        let n = self.iterations.len();
        let rounds: Vec<String> = self
            .iterations
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let ran: Vec<String> = it
                    .ran
                    .iter()
                    .map(|r| match &r.label {
                        Some(l) => format!("{} ({l})", r.node),
                        None => r.node.to_string(),
                    })
                    .collect();
                match lang {
                    Lang::En => format!("{}. {}", i + 1, ran.join(" → ")),
                    Lang::Zh => format!("第 {} 次：{}", i + 1, ran.join(" → ")),
                }
            })
            .collect();
        let name = format!("`{} → {}`", self.to, self.from);
        match lang {
            Lang::En => {
                let times = if n == 1 {
                    "once".to_string()
                } else {
                    format!("{n} times")
                };
                let why = match &self.stopped {
                    LoopStop::Condition { why } => {
                        format!(
                            "the back edge `{} → {}` was not taken: {why}",
                            self.from, self.to
                        )
                    }
                    LoopStop::Bound {
                        bound,
                        limit,
                        spent,
                    } => format!("it reached its bound `{bound}` {limit} (spent: {spent})"),
                    LoopStop::Ended => "the request ended during the last iteration".to_string(),
                };
                format!(
                    "The loop {name} ran {times}: {}; it stopped because {why}.",
                    rounds.join("; ")
                )
            }
            Lang::Zh => {
                let why = match &self.stopped {
                    LoopStop::Condition { why } => {
                        format!("回边 `{} → {}` 未被选中：{why}", self.from, self.to)
                    }
                    LoopStop::Bound {
                        bound,
                        limit,
                        spent,
                    } => format!("达到上限 `{bound}` {limit}（已用：{spent}）"),
                    LoopStop::Ended => "请求在最后一次迭代中结束".to_string(),
                };
                format!(
                    "循环 {name} 运行了 {n} 次：{}；停止原因：{why}。",
                    rounds.join("；")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stopped: LoopStop) -> LoopRun {
        let it = |label: &str| IterationRun {
            ran: vec![
                RanNode {
                    node: "revise".into(),
                    label: None,
                },
                RanNode {
                    node: "check".into(),
                    label: Some(label.into()),
                },
            ],
            tokens: 10,
            cost: Decimal::new(1, 3),
            start_us: 0,
            end_us: 5,
        };
        LoopRun {
            from: "check".into(),
            to: "revise".into(),
            body: vec!["revise".into(), "check".into()],
            max_iterations: 3,
            iterations: vec![it("needs_work"), it("needs_work"), it("ok")],
            stopped,
        }
    }

    #[test]
    fn a_loop_says_how_often_it_ran_and_why_it_stopped_en_and_zh() {
        let r = run(LoopStop::Condition {
            why: "check emitted label ok, not needs_work".into(),
        });
        assert_eq!(
            r.sentence(Lang::En),
            "The loop `revise → check` ran 3 times: 1. revise → check (needs_work); \
             2. revise → check (needs_work); 3. revise → check (ok); it stopped because the \
             back edge `check → revise` was not taken: check emitted label ok, not needs_work."
        );
        assert_eq!(
            r.sentence(Lang::Zh),
            "循环 `revise → check` 运行了 3 次：第 1 次：revise → check (needs_work)；\
             第 2 次：revise → check (needs_work)；第 3 次：revise → check (ok)；停止原因：\
             回边 `check → revise` 未被选中：check emitted label ok, not needs_work。"
        );
        assert_eq!(r.tokens(), 30);
        assert_eq!(r.cost(), Decimal::new(3, 3));
    }

    #[test]
    fn loops_round_trip_through_json_and_old_paths_have_none() {
        let r = run(LoopStop::Bound {
            bound: "max_iterations".into(),
            limit: "3".into(),
            spent: "3 iterations".into(),
        });
        let path = crate::PathRecord {
            loops: vec![r.clone()],
            ..crate::PathRecord::default()
        };
        let json = serde_json::to_value(&path).unwrap();
        assert_eq!(json["loops"][0]["stopped"]["by"], "bound");
        assert_eq!(json["loops"][0]["iterations"][2]["ran"][1]["label"], "ok");
        let back: crate::PathRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back.loops, [r]);
        assert_eq!(back.loop_of("check").map(|l| l.iterations.len()), Some(3));
        assert!(back.is_back_edge("check", "revise"));
        // A path stored before loops existed reads as one without any.
        let old: crate::PathRecord = serde_json::from_str(r#"{"nodes": [], "edges": []}"#).unwrap();
        assert!(old.loops.is_empty());
    }

    #[test]
    fn a_bound_stop_names_the_bound_its_limit_and_the_spend() {
        let r = run(LoopStop::Bound {
            bound: "max_tokens".into(),
            limit: "25".into(),
            spent: "30 tokens".into(),
        });
        assert!(r.sentence(Lang::En).ends_with(
            "it stopped because it reached its bound `max_tokens` 25 (spent: 30 tokens)."
        ));
        assert!(
            r.sentence(Lang::Zh)
                .ends_with("停止原因：达到上限 `max_tokens` 25（已用：30 tokens）。")
        );
    }
}
