//! The diff in plain words (en, zh), rendered from [`Divergence`] data.

use rust_decimal::Decimal;

use super::{Divergence, GuardOutcome, NodeSide, TraceDiff};
use crate::explain::clause;
use crate::{Fact, Lang, NodeStatus};

impl TraceDiff {
    /// The diff in plain words: what differs first and why, in `lang`.
    pub fn explain(&self, lang: Lang) -> String {
        explain(self, lang)
    }
}

fn explain(d: &TraceDiff, lang: Lang) -> String {
    let mut parts = Vec::new();
    if let Some(v) = versions(d, lang) {
        parts.push(v);
    }
    parts.push(match &d.first_divergence {
        None => same(d, lang),
        Some(div) => divergence(d, div, lang),
    });
    if let Some(t) = timing(d, lang) {
        parts.push(t);
    }
    parts.join(" ")
}

fn versions(d: &TraceDiff, lang: Lang) -> Option<String> {
    let (a, b) = (&d.a, &d.b);
    if a.topology_id == b.topology_id && a.version == b.version {
        return None;
    }
    Some(match lang {
        Lang::En => format!(
            "A ran `{}` {} and B ran `{}` {}.",
            a.topology_id, a.version, b.topology_id, b.version
        ),
        Lang::Zh => format!(
            "A 运行的是 `{}` {}，B 运行的是 `{}` {}。",
            a.topology_id, a.version, b.topology_id, b.version
        ),
    })
}

fn arrow(path: &[std::sync::Arc<str>]) -> String {
    path.iter().map(|n| &**n).collect::<Vec<_>>().join(" → ")
}

fn same(d: &TraceDiff, lang: Lang) -> String {
    match lang {
        Lang::En => format!(
            "Both requests took the same path ({}) with the same decisions, input and outputs.",
            arrow(&d.a.path)
        ),
        Lang::Zh => format!(
            "两个请求走了相同的路径（{}），决策、输入和输出都相同。",
            arrow(&d.a.path)
        ),
    }
}

fn status_en(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Succeeded => "ran and succeeded",
        NodeStatus::FellBack => "failed and was replaced by its fallback",
        NodeStatus::Skipped => "was skipped",
        NodeStatus::Failed => "failed",
        NodeStatus::Cancelled => "was cancelled",
        NodeStatus::NotRun => "did not run",
    }
}

fn status_zh(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Succeeded => "执行成功",
        NodeStatus::FellBack => "失败后由备用节点替代",
        NodeStatus::Skipped => "被跳过",
        NodeStatus::Failed => "失败",
        NodeStatus::Cancelled => "被取消",
        NodeStatus::NotRun => "未执行",
    }
}

fn guard_en(g: Option<GuardOutcome>) -> &'static str {
    match g {
        None => "did not judge",
        Some(GuardOutcome::Passed) => "passed",
        Some(GuardOutcome::PassedAfterRerun) => "passed after a rerun",
        Some(GuardOutcome::Replaced) => "replaced",
        Some(GuardOutcome::Flagged) => "flagged",
        Some(GuardOutcome::Rejected) => "rejected",
    }
}

fn guard_zh(g: Option<GuardOutcome>) -> &'static str {
    match g {
        None => "未检查",
        Some(GuardOutcome::Passed) => "通过",
        Some(GuardOutcome::PassedAfterRerun) => "重新生成后通过",
        Some(GuardOutcome::Replaced) => "替换",
        Some(GuardOutcome::Flagged) => "标记",
        Some(GuardOutcome::Rejected) => "拒绝",
    }
}

/// The node's own words about a decision (a routing or guard fact), or
/// what it failed with.
fn because(side: Option<&NodeSide>, node: &str, lang: Lang, pick: fn(&Fact) -> bool) -> String {
    let Some(side) = side else {
        return String::new();
    };
    if let Some(f) = side.facts.iter().rev().find(|f| pick(f)) {
        return format!(" ({})", clause(node, f, lang));
    }
    match &side.error {
        Some(e) => format!(" ({}: {})", e.code, crate::truncate(&e.message, 120)),
        None => String::new(),
    }
}

/// How a node chose its label: its routing fact in words, or the label.
fn decided(side: Option<&NodeSide>, node: &str, label: Option<&str>, lang: Lang) -> String {
    let fact = side.and_then(|s| s.facts.iter().find(|f| matches!(f, Fact::Routed { .. })));
    match (fact, label, lang) {
        (Some(f), _, _) => clause(node, f, lang),
        (None, Some(l), Lang::En) => format!("it emitted `{l}`"),
        (None, Some(l), Lang::Zh) => format!("它输出「{l}」"),
        (None, None, Lang::En) => "it emitted no label".into(),
        (None, None, Lang::Zh) => "它没有输出标签".into(),
    }
}

fn quoted(text: Option<&str>, lang: Lang) -> String {
    let t = crate::truncate(text.unwrap_or(""), 80);
    match lang {
        Lang::En => format!("“{t}”"),
        Lang::Zh => format!("「{t}」"),
    }
}

/// "so only A ran `embed`, `retrieve`; only B ran `x`".
fn consequence(d: &TraceDiff, lang: Lang) -> String {
    let (only_a, only_b) = d.only_in();
    let list = |v: &[&str], sep: &str| {
        v.iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(sep)
    };
    let mut parts = Vec::new();
    match lang {
        Lang::En => {
            if !only_a.is_empty() {
                parts.push(format!("only A ran {}", list(&only_a, ", ")));
            }
            if !only_b.is_empty() {
                parts.push(format!("only B ran {}", list(&only_b, ", ")));
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!(" From there {}.", parts.join(" and "))
            }
        }
        Lang::Zh => {
            if !only_a.is_empty() {
                parts.push(format!("只有 A 执行了 {}", list(&only_a, "、")));
            }
            if !only_b.is_empty() {
                parts.push(format!("只有 B 执行了 {}", list(&only_b, "、")));
            }
            if parts.is_empty() {
                String::new()
            } else {
                format!("此后{}。", parts.join("，"))
            }
        }
    }
}

/// Why a loop stopped, short.
fn loop_stop(stop: &crate::LoopStop, lang: Lang) -> String {
    match (stop, lang) {
        (crate::LoopStop::Condition { why }, Lang::En) => format!("stopped: {why}"),
        (crate::LoopStop::Condition { why }, Lang::Zh) => format!("停止：{why}"),
        (crate::LoopStop::Bound { bound, limit, .. }, Lang::En) => {
            format!("stopped at its bound `{bound}` {limit}")
        }
        (crate::LoopStop::Bound { bound, limit, .. }, Lang::Zh) => {
            format!("达到上限 `{bound}` {limit} 后停止")
        }
        (crate::LoopStop::Ended, Lang::En) => "the request ended in it".to_string(),
        (crate::LoopStop::Ended, Lang::Zh) => "请求在循环中结束".to_string(),
    }
}

fn row<'a>(d: &'a TraceDiff, node: &str) -> (Option<&'a NodeSide>, Option<&'a NodeSide>) {
    d.nodes
        .iter()
        .find(|r| &*r.node == node)
        .map_or((None, None), |r| (r.a.as_ref(), r.b.as_ref()))
}

fn divergence(d: &TraceDiff, div: &Divergence, lang: Lang) -> String {
    let is_guard = |f: &Fact| matches!(f, Fact::Guarded { .. });
    let is_retry = |f: &Fact| {
        matches!(
            f,
            Fact::Retried { .. } | Fact::FellBack { .. } | Fact::Reran { .. }
        )
    };
    let en = lang == Lang::En;
    let mut text = match div {
        Divergence::Status { node, a, b } => {
            let (sa, sb) = row(d, node);
            let (wa, wb) = (
                because(sa, node, lang, is_retry),
                because(sb, node, lang, is_retry),
            );
            if en {
                format!(
                    "The requests first differ at `{node}`: in A it {}{wa}, in B it {}{wb}.",
                    status_en(*a),
                    status_en(*b)
                )
            } else {
                format!(
                    "两个请求最早在 `{node}` 出现分歧：A 中它{}{wa}，B 中它{}{wb}。",
                    status_zh(*a),
                    status_zh(*b)
                )
            }
        }
        Divergence::Label { node, a, b } => {
            let (sa, sb) = row(d, node);
            let (ca, cb) = (
                decided(sa, node, a.as_deref(), lang),
                decided(sb, node, b.as_deref(), lang),
            );
            if en {
                format!("The requests part at `{node}`: in A {ca}, in B {cb}.")
            } else {
                format!("两个请求在 `{node}` 分道：A 中{ca}，B 中{cb}。")
            }
        }
        Divergence::Guard { node, a, b } => {
            let (sa, sb) = row(d, node);
            let (wa, wb) = (
                because(sa, node, lang, is_guard),
                because(sb, node, lang, is_guard),
            );
            if en {
                format!(
                    "The requests took the same path up to the guard `{node}`, which {} A's answer{wa} and {} B's{wb}.",
                    guard_en(*a),
                    guard_en(*b)
                )
            } else {
                format!(
                    "两个请求在输出检查 `{node}` 之前路径相同：它对 A 的回答判定为「{}」{wa}，对 B 的判定为「{}」{wb}。",
                    guard_zh(*a),
                    guard_zh(*b)
                )
            }
        }
        Divergence::Attempts { node, a, b } => {
            let (sa, sb) = row(d, node);
            let (wa, wb) = (
                because(sa, node, lang, is_retry),
                because(sb, node, lang, is_retry),
            );
            if en {
                format!(
                    "The requests first differ at `{node}`: it needed {a} attempt(s) in A{wa} and {b} in B{wb}."
                )
            } else {
                format!(
                    "两个请求最早在 `{node}` 出现分歧：A 中尝试了 {a} 次{wa}，B 中尝试了 {b} 次{wb}。"
                )
            }
        }
        Divergence::Iterations { node, a, b } => {
            let (sa, sb) = row(d, node);
            let stop = |s: Option<&NodeSide>| {
                s.and_then(|s| s.loop_stop.as_ref())
                    .map_or_else(String::new, |st| loop_stop(st, lang))
            };
            let (wa, wb) = (stop(sa), stop(sb));
            if en {
                format!(
                    "The requests first differ in the loop that starts at `{node}`: it ran {a} time(s) in A ({wa}) and {b} in B ({wb})."
                )
            } else {
                format!(
                    "两个请求最早在从 `{node}` 开始的循环出现分歧：A 中运行了 {a} 次（{wa}），B 中运行了 {b} 次（{wb}）。"
                )
            }
        }
        Divergence::Input { a, b } => {
            let (qa, qb) = (quoted(Some(a), lang), quoted(Some(b), lang));
            if en {
                format!(
                    "Both requests took the same path ({}) and made the same decisions; they differ first in their input: A {qa}, B {qb}.",
                    arrow(&d.a.path)
                )
            } else {
                format!(
                    "两个请求走了相同的路径（{}），决策也相同；最早的差别在输入：A 为 {qa}，B 为 {qb}。",
                    arrow(&d.a.path)
                )
            }
        }
        Divergence::Output { node, a, b } => {
            let (qa, qb) = (quoted(a.as_deref(), lang), quoted(b.as_deref(), lang));
            if en {
                format!(
                    "Same input, path and decisions; the first node whose output differs is `{node}`: A {qa}, B {qb}."
                )
            } else {
                format!(
                    "输入、路径和决策都相同；最早输出不同的节点是 `{node}`：A 为 {qa}，B 为 {qb}。"
                )
            }
        }
    };
    if div.is_decision() {
        text.push_str(&consequence(d, lang));
    }
    text
}

fn ms(us: i128) -> String {
    format!("{:.1} ms", us.unsigned_abs() as f64 / 1000.0)
}

/// How much longer and costlier B was, and the node that moved most.
fn timing(d: &TraceDiff, lang: Lang) -> Option<String> {
    let total = i128::from(d.b.duration_us) - i128::from(d.a.duration_us);
    let cost = d.b.cost - d.a.cost;
    let biggest = d
        .nodes
        .iter()
        .filter_map(|r| {
            let x = i128::from(r.a.as_ref()?.duration_us.unwrap_or(0));
            let y = i128::from(r.b.as_ref()?.duration_us.unwrap_or(0));
            Some((&*r.node, y - x))
        })
        .max_by_key(|(_, delta)| delta.abs())
        .filter(|(_, delta)| *delta != 0);
    if total == 0 && cost == Decimal::ZERO {
        return None;
    }
    let currency = &d.b.currency;
    let cost = cost.normalize();
    Some(match lang {
        Lang::En => {
            let mut s = format!(
                "B took {} {} than A",
                ms(total),
                if total >= 0 { "longer" } else { "less" }
            );
            if let Some((node, delta)) = biggest {
                s.push_str(&format!(
                    " (the largest change is `{node}`, {}{})",
                    if delta >= 0 { "+" } else { "-" },
                    ms(delta)
                ));
            }
            s.push_str(&match cost.cmp(&Decimal::ZERO) {
                std::cmp::Ordering::Equal => " and cost the same.".to_string(),
                std::cmp::Ordering::Greater => format!(" and cost {cost} {currency} more."),
                std::cmp::Ordering::Less => format!(" and cost {} {currency} less.", cost.abs()),
            });
            s
        }
        Lang::Zh => {
            let mut s = format!(
                "B 比 A {} {}",
                if total >= 0 { "慢" } else { "快" },
                ms(total)
            );
            if let Some((node, delta)) = biggest {
                s.push_str(&format!(
                    "（变化最大的是 `{node}`，{}{}）",
                    if delta >= 0 { "+" } else { "-" },
                    ms(delta)
                ));
            }
            s.push_str(&match cost.cmp(&Decimal::ZERO) {
                std::cmp::Ordering::Equal => "，费用相同。".to_string(),
                std::cmp::Ordering::Greater => format!("，费用多 {cost} {currency}。"),
                std::cmp::Ordering::Less => format!("，费用少 {} {currency}。", cost.abs()),
            });
            s
        }
    })
}
