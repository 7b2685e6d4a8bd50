//! Plain-language explanations, composed from the nodes' structured facts.
//!
//! Deterministic and free: no model call, just one clause per fact in path
//! order, in English or Chinese. Stores keep the facts, so a stored request
//! can be re-explained in the other language with [`compose`].
//!
//! It lives with the trace model because it reads only trace types (facts,
//! the path, the error record): the engine composes a request's explanation
//! with it as the request ends, and anything holding a stored record (the
//! CLI's `explain`, a store) can do the same without the engine.
//!
//! When branches ran in parallel, a last sentence names the critical path
//! (the chain that set the latency, from the path's own times) and the
//! nodes that ran alongside it without adding to it; a straight path, where
//! every node is on it, adds nothing; nor does a failed request, whose
//! time its failure set.

use crate::critical::{CriticalPath, critical_path};
use crate::{
    ErrorRecord, Fact, Lang, NodeFacts, PathRecord, Scheduling, SpanRecord, VersionChoice,
};

/// Composes the explanation paragraph for a request.
pub fn compose(
    facts: &[NodeFacts],
    path: &PathRecord,
    error: Option<&ErrorRecord>,
    lang: Lang,
) -> String {
    let mut main = Vec::new();
    let mut checks = Vec::new();
    let mut lead = Vec::new();
    for nf in facts {
        for fact in &nf.facts {
            if let Fact::VersionChosen(choice) = fact {
                lead.push(match lang {
                    Lang::En => version_en(choice),
                    Lang::Zh => version_zh(choice),
                });
                continue;
            }
            if let Fact::Scheduled(s) = fact {
                let cut = error.is_some_and(|e| e.code == "deadline_exceeded");
                lead.extend(scheduled(s, cut, lang));
                continue;
            }
            let clause = clause(&nf.node, fact, lang);
            if matches!(fact, Fact::Guarded { .. }) {
                checks.push(clause);
            } else {
                main.push(clause);
            }
        }
    }
    if main.is_empty() && checks.is_empty() {
        let nodes: Vec<&str> = path.taken_nodes().collect();
        if !nodes.is_empty() {
            main.push(match lang {
                Lang::En => format!("the request passed through {}", nodes.join(" → ")),
                Lang::Zh => format!("请求依次经过 {}", nodes.join(" → ")),
            });
        }
    }
    let body = match lang {
        Lang::En => sentence_en(&main, &checks),
        Lang::Zh => sentence_zh(&main, &checks),
    };
    // Which version served the request is its own sentence, told first.
    let mut text = lead.join(" ");
    if !body.is_empty() {
        if !text.is_empty() && lang == Lang::En {
            text.push(' ');
        }
        text.push_str(&body);
    }
    // Each loop: how often it ran and why it stopped (`looped`).
    for l in &path.loops {
        if !text.is_empty() && lang == Lang::En {
            text.push(' ');
        }
        text.push_str(&l.sentence(lang));
    }
    // A failed request's time was set by its failure, which the last
    // sentence names; only finished requests get the critical path.
    if error.is_none()
        && let Some(critical) = critical_sentence(&critical_path::<SpanRecord>(path, &[]), lang)
    {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&critical);
    }
    if let Some(err) = error {
        let tail = match lang {
            Lang::En => match err.code.as_str() {
                "cancelled" => "The request was cancelled before it finished.".to_string(),
                _ => format!("The request failed: {}.", err.message),
            },
            Lang::Zh => match err.code.as_str() {
                "cancelled" => "请求在完成前被取消。".to_string(),
                _ => format!("请求失败：{}。", err.message),
            },
        };
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&tail);
    }
    text
}

/// `850 ms`, `1.2 ms`: a duration in microseconds as people read it.
pub fn millis(us: u64) -> String {
    if us < 10_000 {
        format!("{:.1} ms", us as f64 / 1000.0)
    } else {
        format!("{} ms", (us + 500) / 1000)
    }
}

/// The sentence naming the critical path, when some node ran off it (with
/// no parallel branch, the path is every node and says nothing new).
pub fn critical_sentence(cp: &CriticalPath, lang: Lang) -> Option<String> {
    if cp.off_path.is_empty() || cp.steps.is_empty() {
        return None;
    }
    let chain = cp
        .steps
        .iter()
        .map(|s| format!("`{}`", s.node))
        .collect::<Vec<_>>()
        .join(" → ");
    let off: Vec<String> = cp.off_path.iter().map(|n| format!("`{n}`")).collect();
    let total = millis(cp.end_us);
    let top = cp.dominant()?;
    Some(match lang {
        Lang::En => {
            let off = match off.as_slice() {
                [one] => format!("{one} ran alongside and added nothing"),
                [a, b] => format!("{a} and {b} ran alongside and added nothing"),
                more => format!("{} ran alongside and added nothing", join_en(more)),
            };
            format!(
                "The latency ({total}) was set by {chain}, most of it in `{}` ({}); {off}.",
                top.node,
                millis(top.added_us)
            )
        }
        Lang::Zh => format!(
            "延迟（{total}）由 {chain} 决定，其中 `{}` 占 {}；{} 并行执行，没有增加延迟。",
            top.node,
            millis(top.added_us),
            off.join("、")
        ),
    })
}

fn join_en(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [head @ .., last] => format!("{}, and {last}", head.join(", ")),
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn sentence_en(main: &[String], checks: &[String]) -> String {
    let body = match (main.is_empty(), checks.is_empty()) {
        (true, true) => return String::new(),
        (false, true) => join_en(main),
        (true, false) => join_en(checks),
        (false, false) => format!("{}; {}", join_en(main), join_en(checks)),
    };
    format!("{}.", capitalize(&body))
}

fn sentence_zh(main: &[String], checks: &[String]) -> String {
    let all: Vec<&str> = main.iter().chain(checks).map(String::as_str).collect();
    if all.is_empty() {
        return String::new();
    }
    format!("{}。", all.join("，"))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn gen_detail(
    version: &Option<String>,
    temperature: &Option<f64>,
    sep: &str,
    temp_word: &str,
) -> String {
    let mut parts = Vec::new();
    if let Some(v) = version {
        parts.push(if v.starts_with('v') {
            v.clone()
        } else {
            format!("v{v}")
        });
    }
    if let Some(t) = temperature {
        parts.push(format!("{temp_word} {t}"));
    }
    parts.join(sep)
}

/// One fact as a clause in `lang` (what [`compose`] joins into a
/// paragraph); the trace diff quotes single clauses.
pub fn clause(node: &str, fact: &Fact, lang: Lang) -> String {
    match lang {
        Lang::En => en(node, fact),
        Lang::Zh => zh(node, fact),
    }
}

fn split_text(choice: &VersionChoice, sep: &str) -> String {
    choice
        .split
        .iter()
        .map(|s| format!("{} {}%", s.version, s.percent))
        .collect::<Vec<_>>()
        .join(sep)
}

fn share_of(choice: &VersionChoice) -> u32 {
    choice
        .split
        .iter()
        .find(|s| s.version == choice.version)
        .map_or(0, |s| s.percent)
}

/// What admission did to the request, when it changed anything: a band
/// its key lowered, a wait for a slot (and the higher-band requests that
/// went first), and, when `cut` (the deadline ended it), the maximum run
/// time that stopped it and where it is set.
fn scheduled(s: &Scheduling, cut: bool, lang: Lang) -> Option<String> {
    let band = s.priority.as_str();
    let mut parts = Vec::new();
    if let Some(asked) = s.asked {
        let key = s.key.as_deref().unwrap_or("?");
        parts.push(match lang {
            Lang::En => format!(
                "It asked for the {asked} band and ran in the {band} band, the most key `{key}` may use (`max_priority`)."
            ),
            Lang::Zh => format!("请求要求 {asked} 优先级，按密钥 `{key}` 的上限（`max_priority`）以 {band} 优先级运行。"),
        });
    }
    if s.waited_ms > 0 || s.passed_over > 0 {
        let waited = seconds(s.waited_ms);
        parts.push(match (lang, s.passed_over) {
            (Lang::En, 0) => {
                format!("It waited {waited} in the {band} band for a free slot of the topology.")
            }
            (Lang::En, n) => format!(
                "It waited {waited} in the {band} band for a free slot, behind {} of higher bands.",
                plural(n as usize, "request", "requests")
            ),
            (Lang::Zh, 0) => format!("请求以 {band} 优先级排队等待空闲名额 {waited}。"),
            (Lang::Zh, n) => format!(
                "请求以 {band} 优先级排队等待空闲名额 {waited}，期间有 {n} 个更高优先级的请求先行。"
            ),
        });
    }
    if cut && let Some(ms) = s.max_run_time_ms {
        let from = s.max_run_time_from.as_deref().unwrap_or("config");
        let limit = seconds(ms);
        parts.push(match lang {
            Lang::En => format!(
                "It was stopped at its maximum run time of {limit} (`max_run_time`, set for the {from})."
            ),
            Lang::Zh => format!("请求在达到最长运行时间 {limit} 时被终止（`max_run_time`，设置于 {from}）。"),
        });
    }
    (!parts.is_empty()).then(|| parts.join(if lang == Lang::En { " " } else { "" }))
}

/// `850 ms`, `2.1 s`: a wait or a limit in milliseconds.
fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn version_en(c: &VersionChoice) -> String {
    let role = match c.role.as_str() {
        "canary" => "canary",
        _ => "promoted",
    };
    let head = format!("Version {} ({role}) served the request", c.version);
    let Some(bucket) = c.bucket else {
        return format!(
            "{head}: no traffic split is set, so the promoted version takes all requests."
        );
    };
    let key = match c.key_from.as_deref() {
        Some("header") => "the request key (header `X-Glassbox-Key`)".to_string(),
        Some("user") => "the request key (the `user` field)".to_string(),
        Some(other) => format!("the request key (`{other}`)"),
        None => "no request key was given, so a random bucket (not sticky) was drawn: it".into(),
    };
    format!(
        "{head}: {key} fell in bucket {bucket} of 100, inside its {}% share of the split {}.",
        share_of(c),
        split_text(c, " / ")
    )
}

fn version_zh(c: &VersionChoice) -> String {
    let role = match c.role.as_str() {
        "canary" => "灰度版本",
        _ => "当前发布版本",
    };
    let head = format!("本次请求由版本 {}（{role}）处理", c.version);
    let Some(bucket) = c.bucket else {
        return format!("{head}：未设置流量分配，全部请求由当前发布版本处理。");
    };
    let key = match c.key_from.as_deref() {
        Some("header") => "请求键（`X-Glassbox-Key` 请求头）".to_string(),
        Some("user") => "请求键（`user` 字段）".to_string(),
        Some(other) => format!("请求键（`{other}`）"),
        None => "未提供请求键，随机抽取的分桶（不固定）".into(),
    };
    format!(
        "{head}：{key}落在第 {bucket} 号桶（共 100 个），属于该版本 {}% 的份额（分配：{}）。",
        share_of(c),
        split_text(c, "，")
    )
}

/// The `rule` a router reports when it routed by its nearest labelled
/// example rather than a rule; `reason` then names the example.
pub const NEAREST_EXAMPLE: &str = "nearest_example";

fn en(node: &str, fact: &Fact) -> String {
    match fact {
        Fact::Routed {
            label,
            rule,
            reason,
        } => match rule {
            Some(rule) if rule == NEAREST_EXAMPLE => {
                format!("the question was classified as `{label}` ({reason})")
            }
            Some(rule) => format!("the question was classified as `{label}` (rule `{rule}`)"),
            None => format!("the question was classified as `{label}` (no rule matched; default)"),
        },
        Fact::Retrieved { count, titles } if titles.is_empty() => {
            format!(
                "{} retrieved",
                plural(*count, "document was", "documents were")
            )
        }
        Fact::Retrieved { count, titles } => {
            let quoted = titles
                .iter()
                .map(|t| format!("“{t}”"))
                .collect::<Vec<_>>()
                .join(", ");
            if titles.len() < *count {
                // Several chunks of one document: say so, or the count and the
                // titles listed disagree.
                format!(
                    "{} retrieved from {} ({quoted})",
                    plural(*count, "passage was", "passages were"),
                    plural(titles.len(), "document", "documents")
                )
            } else {
                format!(
                    "{} retrieved ({quoted})",
                    plural(*count, "document was", "documents were")
                )
            }
        }
        Fact::Embedded { model, count } => {
            format!(
                "{} embedded by {model}",
                plural(*count, "text was", "texts were")
            )
        }
        Fact::Templated { template_id } => {
            format!("the prompt was built from template `{template_id}`")
        }
        Fact::Generated {
            model,
            version,
            temperature,
            ..
        } => {
            let detail = gen_detail(version, temperature, ", ", "temperature");
            if detail.is_empty() {
                format!("the answer was generated by {model}")
            } else {
                format!("the answer was generated by {model} ({detail})")
            }
        }
        Fact::Guarded {
            passed: true,
            rules,
            ..
        } => {
            format!(
                "the output guard passed {}",
                plural(*rules, "rule", "rules")
            )
        }
        Fact::Guarded {
            passed: false,
            hits,
            action,
            ..
        } => {
            let hits = hits
                .iter()
                .map(|h| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join(", ");
            match action.as_deref() {
                Some("replaced") => {
                    format!("the output guard flagged {hits} and replaced the answer")
                }
                Some("rerun") => {
                    format!("the output guard flagged {hits} and had the answer regenerated")
                }
                _ => format!("the output guard flagged {hits}"),
            }
        }
        Fact::Http { host, status } => format!("{host} answered HTTP {status}"),
        Fact::Retried { attempts, cause } => {
            format!("`{node}` needed {attempts} attempts (last failure: {cause})")
        }
        Fact::FellBack { fallback, cause } => {
            format!("`{node}` failed ({cause}) and its fallback `{fallback}` stood in for it")
        }
        Fact::Reran {
            node: up,
            times,
            reason,
        } => format!(
            "`{node}` had `{up}` re-run {} ({reason})",
            plural(*times as usize, "time", "times")
        ),
        Fact::Cached {
            similarity, age_ms, ..
        } => {
            let how = match similarity {
                Some(s) => format!("a request {:.0}% similar", s * 100.0),
                None => "the same request".to_string(),
            };
            format!(
                "`{node}` was answered from the response cache ({how}, {} earlier) without being called, at no cost",
                age_en(*age_ms)
            )
        }
        Fact::Note { en, .. } => en.clone(),
        Fact::VersionChosen(c) => version_en(c),
        Fact::Scheduled(s) => scheduled(s, false, Lang::En).unwrap_or_default(),
        Fact::Placed(p) => crate::explain_place::clause(node, p, Lang::En),
    }
}

fn age_en(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..120_000 => plural((ms / 1_000) as usize, "second", "seconds"),
        120_000..7_200_000 => plural((ms / 60_000) as usize, "minute", "minutes"),
        _ => plural((ms / 3_600_000) as usize, "hour", "hours"),
    }
}

fn age_zh(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} 毫秒"),
        1_000..120_000 => format!("{} 秒", ms / 1_000),
        120_000..7_200_000 => format!("{} 分钟", ms / 60_000),
        _ => format!("{} 小时", ms / 3_600_000),
    }
}

fn zh(node: &str, fact: &Fact) -> String {
    match fact {
        Fact::Routed {
            label,
            rule,
            reason,
        } => match rule {
            Some(rule) if rule == NEAREST_EXAMPLE => {
                format!("问题被归类为「{label}」（按最相近的示例：{reason}）")
            }
            Some(rule) => format!("问题被归类为「{label}」（规则 `{rule}`）"),
            None => format!("问题被归类为「{label}」（未命中规则，使用默认）"),
        },
        Fact::Retrieved { count, titles } if titles.is_empty() => format!("检索到 {count} 篇文档"),
        Fact::Retrieved { count, titles } => {
            let quoted = titles
                .iter()
                .map(|t| format!("《{t}》"))
                .collect::<Vec<_>>()
                .join("、");
            if titles.len() < *count {
                format!(
                    "检索到 {count} 个片段，来自 {} 篇文档（{quoted}）",
                    titles.len()
                )
            } else {
                format!("检索到 {count} 篇文档（{quoted}）")
            }
        }
        Fact::Embedded { model, count } => format!("{count} 段文本由 {model} 向量化"),
        Fact::Templated { template_id } => format!("提示词由模板 `{template_id}` 组装"),
        Fact::Generated {
            model,
            version,
            temperature,
            ..
        } => {
            let detail = gen_detail(version, temperature, "，", "温度");
            if detail.is_empty() {
                format!("回答由 {model} 生成")
            } else {
                format!("回答由 {model}（{detail}）生成")
            }
        }
        Fact::Guarded {
            passed: true,
            rules,
            ..
        } => format!("输出检查通过了 {rules} 条规则"),
        Fact::Guarded {
            passed: false,
            hits,
            action,
            ..
        } => {
            let hits = hits
                .iter()
                .map(|h| format!("`{h}`"))
                .collect::<Vec<_>>()
                .join("、");
            match action.as_deref() {
                Some("replaced") => format!("输出检查命中 {hits}，已替换回答"),
                Some("rerun") => format!("输出检查命中 {hits}，已重新生成回答"),
                _ => format!("输出检查命中 {hits}"),
            }
        }
        Fact::Http { host, status } => format!("{host} 返回 HTTP {status}"),
        Fact::Retried { attempts, cause } => {
            format!("`{node}` 共尝试 {attempts} 次（最后一次失败：{cause}）")
        }
        Fact::FellBack { fallback, cause } => {
            format!("`{node}` 失败（{cause}），由备用节点 `{fallback}` 替代")
        }
        Fact::Reran {
            node: up,
            times,
            reason,
        } => {
            format!("`{node}` 让 `{up}` 重新执行了 {times} 次（{reason}）")
        }
        Fact::Cached {
            similarity, age_ms, ..
        } => {
            let how = match similarity {
                Some(s) => format!(
                    "与 {}前一个相似度 {:.0}% 的请求",
                    age_zh(*age_ms),
                    s * 100.0
                ),
                None => format!("与 {}前的请求完全相同", age_zh(*age_ms)),
            };
            format!("`{node}` 直接由响应缓存作答（{how}），未实际调用，不产生费用")
        }
        Fact::Note { zh, .. } => zh.clone(),
        Fact::VersionChosen(c) => version_zh(c),
        Fact::Scheduled(s) => scheduled(s, false, Lang::Zh).unwrap_or_default(),
        Fact::Placed(p) => crate::explain_place::clause(node, p, Lang::Zh),
    }
}

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
