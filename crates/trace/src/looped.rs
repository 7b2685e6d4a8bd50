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
                        format!(
                            "回边 `{} → {}` 未被选中：{}",
                            self.from,
                            self.to,
                            why_zh(why)
                        )
                    }
                    LoopStop::Bound {
                        bound,
                        limit,
                        spent,
                    } => format!(
                        "达到{}上限 `{bound}` {limit}（已用：{}）",
                        bound_zh(bound),
                        spent_zh(spent)
                    ),
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

/// What a loop bound limits, in Chinese.
fn bound_zh(bound: &str) -> &'static str {
    match bound {
        "max_iterations" => "迭代次数",
        "max_tokens" => " token ",
        "max_cost" => "费用",
        "max_time_ms" => "时间",
        _ => "",
    }
}

/// What a loop had spent, as the engine writes it ("3 iterations",
/// "30 tokens", "1200 ms", "0.02 USD"), in Chinese.
fn spent_zh(spent: &str) -> String {
    let (n, unit) = spent.split_once(' ').unwrap_or((spent, ""));
    match unit {
        "iteration" | "iterations" => format!("{n} 次迭代"),
        "tokens" => format!("{n} 个 token"),
        "ms" => format!("{n} 毫秒"),
        _ => spent.to_string(),
    }
}

/// Why a back edge was not taken, as the engine words it, in Chinese:
/// the label and skip cases; a condition's own text (a CEL expression
/// and the values it read) is kept as written.
fn why_zh(why: &str) -> String {
    if let Some((name, rest)) = why.split_once(" did not run (")
        && let Some(rest) = rest.strip_suffix(')')
    {
        let rest: Vec<String> = rest.split("; ").map(why_zh).collect();
        return format!("{name} 未运行（{}）", rest.join("；"));
    }
    if let Some((who, rest)) = why.split_once(" emitted label ")
        && let Some((got, want)) = rest.split_once(", not ")
    {
        return format!("{who} 输出的标签是 {got}，而不是 {want}");
    }
    if let Some((who, want)) = why.split_once(" emitted no label (wanted ")
        && let Some(want) = want.strip_suffix(')')
    {
        return format!("{who} 没有输出标签（需要 {want}）");
    }
    if let Some((expr, values)) = why.split_once(" is false") {
        let values = values
            .strip_prefix(" (")
            .and_then(|v| v.strip_suffix(')'))
            .map(|v| format!("（{v}）"))
            .unwrap_or_default();
        return format!("{expr} 为 false{values}");
    }
    match why {
        "source failed" => "源节点失败".to_string(),
        "source skipped" => "源节点被跳过".to_string(),
        _ => why.to_string(),
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
             回边 `check → revise` 未被选中：check 输出的标签是 ok，而不是 needs_work。"
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
                .ends_with("停止原因：达到 token 上限 `max_tokens` 25（已用：30 个 token）。")
        );
    }

    #[test]
    fn a_stop_in_chinese_says_the_bound_the_spend_and_the_reason_in_chinese() {
        for (bound, limit, spent, want) in [
            (
                "max_iterations",
                "4",
                "4 iterations",
                "达到迭代次数上限 `max_iterations` 4（已用：4 次迭代）",
            ),
            (
                "max_time_ms",
                "500",
                "731 ms",
                "达到时间上限 `max_time_ms` 500（已用：731 毫秒）",
            ),
            (
                "max_cost",
                "0.01",
                "0.012 USD",
                "达到费用上限 `max_cost` 0.01（已用：0.012 USD）",
            ),
        ] {
            let zh = run(LoopStop::Bound {
                bound: bound.into(),
                limit: limit.into(),
                spent: spent.into(),
            })
            .sentence(Lang::Zh);
            assert!(zh.ends_with(&format!("停止原因：{want}。")), "{zh}");
            assert!(!zh.contains(" iteration") && !zh.contains(" ms"), "{zh}");
        }
        for (why, want) in [
            (
                "check emitted no label (wanted needs_work)",
                "check 没有输出标签（需要 needs_work）",
            ),
            (
                "check did not run (source failed; revise emitted label ok, not again)",
                "check 未运行（源节点失败；revise 输出的标签是 ok，而不是 again）",
            ),
            (
                "outputs.check.score < 0.5 is false (outputs.check.score = 0.9)",
                "outputs.check.score < 0.5 为 false（outputs.check.score = 0.9）",
            ),
        ] {
            let zh = run(LoopStop::Condition { why: why.into() }).sentence(Lang::Zh);
            assert!(zh.ends_with(&format!("未被选中：{want}。")), "{zh}");
        }
    }
}
