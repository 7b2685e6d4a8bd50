//! The clause for a [`Placed`] fact: which worker ran a node and why, in
//! one plain sentence part, e.g. "`llm` ran on worker w2 (least loaded for
//! smollm2 on NVIDIA L4; w1 busier, w3 lacks the model)".
//!
//! Other candidates are named by the first filter they failed (or "busier"
//! when they were eligible but scored worse), at most [`NAMED`] of them;
//! workers the call failed on before are named with their errors.

use crate::Lang;
use crate::placed::{Placed, PlacedCandidate};

/// Most other candidates named in one clause.
pub const NAMED: usize = 4;

/// The clause for `node`'s placement in `lang`.
pub fn clause(node: &str, p: &Placed, lang: Lang) -> String {
    let others: Vec<&PlacedCandidate> = p
        .candidates
        .iter()
        .filter(|c| c.worker != p.worker && !p.failed.iter().any(|f| f.worker == c.worker))
        .collect();
    let mut named: Vec<String> = others
        .iter()
        .take(NAMED)
        .map(|c| format!("{} {}", c.worker, verdict(c, p, lang)))
        .collect();
    if others.len() > NAMED {
        let more = others.len() - NAMED;
        named.push(match lang {
            Lang::En => format!("{more} more"),
            Lang::Zh => format!("另有 {more} 个"),
        });
    }
    let why = reason(p, lang);
    match lang {
        Lang::En => {
            let mut inner = why;
            if !named.is_empty() {
                inner = format!("{inner}; {}", named.join(", "));
            }
            let mut s = format!("`{node}` ran on worker {} ({inner})", p.worker);
            if !p.failed.is_empty() {
                let failed: Vec<String> = p
                    .failed
                    .iter()
                    .map(|f| format!("{} failed ({})", f.worker, f.error))
                    .collect();
                s.push_str(&format!(" after {}", failed.join(", then ")));
            }
            s
        }
        Lang::Zh => {
            let mut inner = why;
            if !named.is_empty() {
                inner = format!("{inner}；{}", named.join("，"));
            }
            let mut s = format!("`{node}` 在 worker {} 上运行（{inner}）", p.worker);
            if !p.failed.is_empty() {
                let failed: Vec<String> = p
                    .failed
                    .iter()
                    .map(|f| format!("{} 失败（{}）", f.worker, f.error))
                    .collect();
                s.push_str(&format!("，此前 {}", failed.join("，随后 ")));
            }
            s
        }
    }
}

fn reason(p: &Placed, lang: Lang) -> String {
    let model = p.model.as_deref().unwrap_or("the call");
    let group = p.affinity.as_deref().unwrap_or("");
    let base = match (lang, p.rule.as_str()) {
        (Lang::En, "affinity") => format!("kept with its affinity group `{group}`"),
        (Lang::En, "tied") => format!(
            "tied on load for {model}, taken in weighted turn by capability ({})",
            p.hardware
        ),
        (Lang::En, "stale") => {
            format!(
                "load reports stale, taken in weighted turn by capability ({})",
                p.hardware
            )
        }
        (Lang::En, "round_robin") => format!("its turn in plain round robin ({})", p.hardware),
        (Lang::En, "random") => format!("drawn at random ({})", p.hardware),
        (Lang::En, "panic") => format!(
            "panic mode: every worker for {model} was marked unhealthy but alive, so the least loaded of them ({})",
            p.hardware
        ),
        (Lang::En, _) => format!("least loaded for {model} on its hardware, {}", p.hardware),
        (Lang::Zh, "affinity") => format!("与亲和组 `{group}` 保持在同一 worker"),
        (Lang::Zh, "tied") => format!("{model} 的负载相当，按算力加权轮询选中（{}）", p.hardware),
        (Lang::Zh, "stale") => format!("负载报告已过时，按算力加权轮询选中（{}）", p.hardware),
        (Lang::Zh, "round_robin") => format!("按普通轮询轮到（{}）", p.hardware),
        (Lang::Zh, "random") => format!("随机选中（{}）", p.hardware),
        (Lang::Zh, "panic") => format!(
            "恐慌模式：{model} 的所有 worker 都被标为不健康但仍存活，选其中负载最低者（{}）",
            p.hardware
        ),
        (Lang::Zh, _) => format!("{model} 在其硬件 {} 上负载最低", p.hardware),
    };
    match (&p.rebound_from, lang) {
        (Some(from), Lang::En) => {
            format!("{base}; affinity group `{group}` moved here from {from}")
        }
        (Some(from), Lang::Zh) => format!("{base}；亲和组 `{group}` 从 {from} 迁移至此"),
        (None, _) => base,
    }
}

/// What to say of a candidate that was not chosen.
fn verdict(c: &PlacedCandidate, p: &Placed, lang: Lang) -> &'static str {
    let first = c.failed.first().map(|m| m.filter.as_str());
    match (lang, first) {
        (Lang::En, None) if matches!(p.rule.as_str(), "tied" | "stale" | "round_robin") => {
            "waits its turn"
        }
        (Lang::En, None) if p.rule == "random" => "not drawn",
        (Lang::En, None) => "busier",
        (Lang::En, Some("kind")) => "does not run this kind of node",
        (Lang::En, Some("model")) => "lacks the model",
        (Lang::En, Some("health")) => "unhealthy",
        (Lang::En, Some("tried")) => "already failed this call",
        (Lang::En, Some("load")) => "stopped reporting load",
        (Lang::En, Some("affinity")) => "outside the affinity group's worker",
        (Lang::En, Some(_)) => "filtered out",
        (Lang::Zh, None) if matches!(p.rule.as_str(), "tied" | "stale" | "round_robin") => {
            "等待轮到"
        }
        (Lang::Zh, None) if p.rule == "random" => "未被抽中",
        (Lang::Zh, None) => "更忙",
        (Lang::Zh, Some("kind")) => "不运行此类节点",
        (Lang::Zh, Some("model")) => "没有该模型",
        (Lang::Zh, Some("health")) => "不健康",
        (Lang::Zh, Some("tried")) => "本次调用已失败",
        (Lang::Zh, Some("load")) => "已停止报告负载",
        (Lang::Zh, Some("affinity")) => "不是亲和组所在的 worker",
        (Lang::Zh, Some(_)) => "被过滤",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placed::{FailedAttempt, FilterMiss};

    fn cand(worker: &str, failed: Option<(&str, &str)>, score: Option<f64>) -> PlacedCandidate {
        PlacedCandidate {
            worker: worker.into(),
            hardware: "NVIDIA L4".into(),
            failed: failed
                .map(|(f, d)| FilterMiss {
                    filter: f.into(),
                    detail: d.into(),
                })
                .into_iter()
                .collect(),
            load: None,
            score,
        }
    }

    fn placed() -> Placed {
        Placed {
            worker: "w2".into(),
            hardware: "NVIDIA L4".into(),
            model: Some("smollm2".into()),
            rule: "least_loaded".into(),
            affinity: None,
            rebound_from: None,
            candidates: vec![
                cand("w1", None, Some(4.0)),
                cand("w2", None, Some(1.0)),
                cand("w3", Some(("model", "does not serve `smollm2`")), None),
            ],
            failed: vec![],
        }
    }

    #[test]
    fn says_where_and_why_in_one_sentence_part() {
        assert_eq!(
            clause("llm", &placed(), Lang::En),
            "`llm` ran on worker w2 (least loaded for smollm2 on its hardware, NVIDIA L4; w1 busier, w3 lacks the model)"
        );
        assert_eq!(
            clause("llm", &placed(), Lang::Zh),
            "`llm` 在 worker w2 上运行（smollm2 在其硬件 NVIDIA L4 上负载最低；w1 更忙，w3 没有该模型）"
        );
    }

    #[test]
    fn panic_mode_is_said_as_such() {
        let mut p = placed();
        p.rule = "panic".into();
        p.candidates[0].failed.push(FilterMiss {
            filter: "health".into(),
            detail: "circuit open".into(),
        });
        let en = clause("llm", &p, Lang::En);
        assert!(
            en.contains("panic mode: every worker for smollm2 was marked unhealthy but alive"),
            "{en}"
        );
        assert!(en.contains("w1 unhealthy"), "{en}");
        assert!(clause("llm", &p, Lang::Zh).contains("恐慌模式"));
    }

    #[test]
    fn failover_names_the_workers_that_failed_first() {
        let mut p = placed();
        p.failed.push(FailedAttempt {
            worker: "w1".into(),
            error: "connection refused".into(),
        });
        let en = clause("llm", &p, Lang::En);
        assert!(en.ends_with("after w1 failed (connection refused)"), "{en}");
        assert!(
            !en.contains("w1 busier"),
            "a failed worker is named once: {en}"
        );
        let zh = clause("llm", &p, Lang::Zh);
        assert!(zh.ends_with("此前 w1 失败（connection refused）"), "{zh}");
    }

    #[test]
    fn affinity_and_its_move_are_told() {
        let mut p = placed();
        p.rule = "affinity".into();
        p.affinity = Some("gpu-a".into());
        let en = clause("llm", &p, Lang::En);
        assert!(en.contains("kept with its affinity group `gpu-a`"), "{en}");
        p.rule = "least_loaded".into();
        p.rebound_from = Some("w9".into());
        let en = clause("llm", &p, Lang::En);
        assert!(
            en.contains("affinity group `gpu-a` moved here from w9"),
            "{en}"
        );
    }

    #[test]
    fn the_baseline_policies_say_which_rule_chose() {
        let mut p = placed();
        p.rule = "round_robin".into();
        assert_eq!(
            clause("llm", &p, Lang::En),
            "`llm` ran on worker w2 (its turn in plain round robin (NVIDIA L4); w1 waits its turn, w3 lacks the model)"
        );
        assert!(clause("llm", &p, Lang::Zh).contains("按普通轮询轮到"));
        p.rule = "random".into();
        let en = clause("llm", &p, Lang::En);
        assert!(
            en.contains("drawn at random") && en.contains("w1 not drawn"),
            "{en}"
        );
        assert!(clause("llm", &p, Lang::Zh).contains("w1 未被抽中"));
    }

    #[test]
    fn long_candidate_lists_are_cut() {
        let mut p = placed();
        for i in 0..6 {
            p.candidates.push(cand(&format!("x{i}"), None, Some(9.0)));
        }
        let en = clause("llm", &p, Lang::En);
        assert!(en.contains(", 4 more)"), "{en}");
    }
}
