//! An agent's budgets, what it spent, and why its loop stopped, told in
//! English and Chinese. Pure: the loop asks [`Budget::over`] before each
//! model call and [`explain`] once at the end.

use std::time::Duration;

/// The bounds of one agent run: `max_iterations` model calls always,
/// tokens, cost and wall time when set.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    pub max_iterations: u32,
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub max_time: Option<Duration>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_iterations: 4,
            max_tokens: None,
            max_cost: None,
            max_time: None,
        }
    }
}

/// What a run has used so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Model calls made.
    pub iterations: u32,
    pub tokens: u64,
    pub cost: f64,
    pub elapsed: Duration,
}

/// Which bound ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Iterations,
    Tokens,
    Cost,
    Time,
}

impl Bound {
    /// The config field that sets it.
    pub fn field(self) -> &'static str {
        match self {
            Self::Iterations => "max_iterations",
            Self::Tokens => "budget.max_tokens",
            Self::Cost => "budget.max_cost",
            Self::Time => "budget.max_time_ms",
        }
    }

    fn zh(self) -> &'static str {
        match self {
            Self::Iterations => "迭代次数",
            Self::Tokens => "token",
            Self::Cost => "费用",
            Self::Time => "时间",
        }
    }

    fn en(self) -> &'static str {
        match self {
            Self::Iterations => "iteration",
            Self::Tokens => "token",
            Self::Cost => "cost",
            Self::Time => "time",
        }
    }
}

impl Budget {
    /// The first bound `spent` has reached, if any: no further model call
    /// may start.
    pub fn over(&self, spent: &Spent) -> Option<Bound> {
        if spent.iterations >= self.max_iterations {
            return Some(Bound::Iterations);
        }
        if self.max_tokens.is_some_and(|m| spent.tokens >= m) {
            return Some(Bound::Tokens);
        }
        if self.max_cost.is_some_and(|m| spent.cost >= m) {
            return Some(Bound::Cost);
        }
        if self.max_time.is_some_and(|m| spent.elapsed >= m) {
            return Some(Bound::Time);
        }
        None
    }

    /// The limit of `bound`, as written in the config.
    fn limit(&self, bound: Bound) -> String {
        match bound {
            Bound::Iterations => self.max_iterations.to_string(),
            Bound::Tokens => self.max_tokens.unwrap_or_default().to_string(),
            Bound::Cost => format!("{}", self.max_cost.unwrap_or_default()),
            Bound::Time => format!("{} ms", self.max_time.map_or(0, |t| t.as_millis())),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The model answered.
    Answered,
    /// A bound was reached while the agent was `doing` something.
    Budget { bound: Bound, doing: Doing },
    /// The model repeated a call to `tool` it had already made, and
    /// `on_repeat: stop` ended the loop.
    Repeated { tool: String },
}

/// What an agent was doing when a budget stopped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// Nothing yet: the first model call had not started.
    Starting,
    /// About to give the model the result of this tool.
    Using(String),
    /// About to ask the model for its answer from the earlier result of
    /// this tool, which it had asked for again (`on_repeat: answer`).
    Answering(String),
}

impl Doing {
    fn en(&self) -> String {
        match self {
            Self::Starting => "about to make its first model call".into(),
            Self::Using(tool) => format!("using the result of `{tool}`"),
            Self::Answering(tool) => {
                format!("about to answer from the earlier result of `{tool}`")
            }
        }
    }

    fn zh(&self) -> String {
        match self {
            Self::Starting => "准备进行第一次模型调用".into(),
            Self::Using(tool) => format!("处理 `{tool}` 的结果"),
            Self::Answering(tool) => format!("准备根据 `{tool}` 先前的结果作答"),
        }
    }
}

impl Stop {
    /// The run's status, as the output's `status` and the node's label.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Budget { .. } => "budget_exhausted",
            Self::Repeated { .. } => "repeated_call",
        }
    }
}

/// The run in plain words, English and Chinese: how many model and tool
/// calls, which tools, tokens used, why it stopped, and the tool calls
/// its model repeated (`repeated`: the tools, once per repeat) that were
/// answered from their earlier result instead of being run again.
pub fn explain(
    stop: &Stop,
    budget: &Budget,
    spent: &Spent,
    tools: &[String],
    repeated: &[String],
) -> (String, String) {
    let calls = tools.len();
    let list = if tools.is_empty() {
        String::new()
    } else {
        format!(" ({})", tools.join(", "))
    };
    let list_zh = if tools.is_empty() {
        String::new()
    } else {
        format!("（{}）", tools.join("、"))
    };
    let n = spent.iterations;
    let model_calls = if n == 1 { "model call" } else { "model calls" };
    let tool_calls = if calls == 1 {
        "tool call"
    } else {
        "tool calls"
    };
    let tokens = spent.tokens;
    let asked = *stop == Stop::Answered;
    let (again, again_zh) = repeats(repeated, asked);
    match stop {
        Stop::Answered => (
            format!(
                "The agent answered after {n} {model_calls} and {calls} {tool_calls}{list}, \
                 using {tokens} tokens{again}."
            ),
            format!(
                "智能体经过 {n} 次模型调用和 {calls} 次工具调用{list_zh}后给出回答，\
                 共用 {tokens} 个 token{again_zh}。"
            ),
        ),
        Stop::Budget { bound, doing } => {
            let limit = budget.limit(*bound);
            let (doing, doing_zh) = (doing.en(), doing.zh());
            (
                format!(
                    "The agent stopped without an answer after {n} {model_calls} and {calls} \
                     {tool_calls}{list}: its {} budget (`{}` {limit}) ran out while it was \
                     {doing}; it had used {tokens} tokens{again}.",
                    bound.en(),
                    bound.field(),
                ),
                format!(
                    "智能体经过 {n} 次模型调用和 {calls} 次工具调用{list_zh}后未能作答而停止：\
                     {}预算（`{}` {limit}）已用完，当时正在{doing_zh}；共用 {tokens} 个 token\
                     {again_zh}。",
                    bound.zh(),
                    bound.field(),
                ),
            )
        }
        Stop::Repeated { tool } => (
            format!(
                "The agent stopped without an answer after {n} {model_calls} and {calls} \
                 {tool_calls}{list}: its model repeated a call it had already made (`{tool}` \
                 with the same arguments), and `on_repeat: stop` ends the loop there; it had \
                 used {tokens} tokens."
            ),
            format!(
                "智能体经过 {n} 次模型调用和 {calls} 次工具调用{list_zh}后未能作答而停止：\
                 模型重复了已做过的调用（`{tool}`，参数相同），`on_repeat: stop` 在此结束循环；\
                 共用 {tokens} 个 token。"
            ),
        ),
    }
}

/// The clause on repeated calls (empty when there were none), starting
/// with its separator; `asked`: the model was then asked for its answer.
fn repeats(repeated: &[String], asked: bool) -> (String, String) {
    if repeated.is_empty() {
        return (String::new(), String::new());
    }
    let mut names: Vec<&str> = Vec::new();
    for tool in repeated {
        if !names.contains(&tool.as_str()) {
            names.push(tool);
        }
    }
    let named = names
        .iter()
        .map(|t| format!("`{t}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let named_zh = names
        .iter()
        .map(|t| format!("`{t}`"))
        .collect::<Vec<_>>()
        .join("、");
    let k = repeated.len();
    let (what, what_zh) = if k == 1 {
        ("a call".to_string(), "已做过的调用".to_string())
    } else {
        (format!("{k} calls"), format!(" {k} 次已做过的调用"))
    };
    let (then, then_zh) = if asked {
        (
            ", so the tool was not run again and the model was asked to answer from the \
             earlier result",
            "，因此未再次运行该工具，而是要求模型根据先前的结果作答",
        )
    } else {
        (", so the tool was not run again", "，因此未再次运行该工具")
    };
    (
        format!(
            "; its model repeated {what} it had already made ({named} with the same arguments){then}"
        ),
        format!("；模型重复了{what_zh}（{named_zh}，参数相同）{then_zh}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterations_bound_every_run_and_the_others_when_set() {
        let b = Budget {
            max_iterations: 3,
            max_tokens: Some(100),
            max_cost: Some(0.5),
            max_time: Some(Duration::from_secs(2)),
        };
        let mut s = Spent::default();
        assert_eq!(b.over(&s), None);
        s.tokens = 100;
        assert_eq!(b.over(&s), Some(Bound::Tokens));
        s.tokens = 0;
        s.cost = 0.5;
        assert_eq!(b.over(&s), Some(Bound::Cost));
        s.cost = 0.0;
        s.elapsed = Duration::from_secs(3);
        assert_eq!(b.over(&s), Some(Bound::Time));
        s.iterations = 3;
        assert_eq!(b.over(&s), Some(Bound::Iterations), "iterations first");
        assert_eq!(Budget::default().over(&Spent::default()), None);
    }

    #[test]
    fn a_budget_stop_names_the_budget_and_what_the_agent_was_doing() {
        let b = Budget {
            max_iterations: 2,
            ..Budget::default()
        };
        let spent = Spent {
            iterations: 2,
            tokens: 812,
            ..Spent::default()
        };
        let stop = Stop::Budget {
            bound: Bound::Iterations,
            doing: Doing::Using("search_kb".into()),
        };
        let (en, zh) = explain(
            &stop,
            &b,
            &spent,
            &["search_kb".into(), "search_kb".into()],
            &[],
        );
        assert_eq!(
            en,
            "The agent stopped without an answer after 2 model calls and 2 tool calls \
             (search_kb, search_kb): its iteration budget (`max_iterations` 2) ran out while it \
             was using the result of `search_kb`; it had used 812 tokens."
        );
        assert!(
            zh.contains("迭代次数预算（`max_iterations` 2）已用完"),
            "{zh}"
        );
        assert_eq!(stop.status(), "budget_exhausted");
    }

    #[test]
    fn every_budget_is_named_en_and_zh_with_its_limit_and_what_the_agent_was_doing() {
        let b = Budget {
            max_iterations: 5,
            max_tokens: Some(300),
            max_cost: Some(0.002),
            max_time: Some(Duration::from_millis(1500)),
        };
        let spent = Spent {
            iterations: 2,
            tokens: 310,
            ..Spent::default()
        };
        for (bound, en_part, zh_part) in [
            (
                Bound::Iterations,
                "its iteration budget (`max_iterations` 5)",
                "迭代次数预算（`max_iterations` 5）",
            ),
            (
                Bound::Tokens,
                "its token budget (`budget.max_tokens` 300)",
                "token预算（`budget.max_tokens` 300）",
            ),
            (
                Bound::Cost,
                "its cost budget (`budget.max_cost` 0.002)",
                "费用预算（`budget.max_cost` 0.002）",
            ),
            (
                Bound::Time,
                "its time budget (`budget.max_time_ms` 1500 ms)",
                "时间预算（`budget.max_time_ms` 1500 ms）",
            ),
        ] {
            let stop = Stop::Budget {
                bound,
                doing: Doing::Using("lookup_order".into()),
            };
            let (en, zh) = explain(&stop, &b, &spent, &["lookup_order".into()], &[]);
            assert!(en.contains(en_part), "{en}");
            assert!(
                en.contains("ran out while it was using the result of `lookup_order`"),
                "{en}"
            );
            assert!(en.contains("1 tool call (lookup_order)"), "{en}");
            assert!(zh.contains(zh_part), "{zh}");
            assert!(zh.contains("当时正在处理 `lookup_order` 的结果"), "{zh}");
            assert_eq!(stop.status(), "budget_exhausted");
        }
    }

    #[test]
    fn an_answer_counts_the_calls() {
        let spent = Spent {
            iterations: 1,
            tokens: 40,
            ..Spent::default()
        };
        let (en, zh) = explain(&Stop::Answered, &Budget::default(), &spent, &[], &[]);
        assert_eq!(
            en,
            "The agent answered after 1 model call and 0 tool calls, using 40 tokens."
        );
        assert_eq!(
            zh,
            "智能体经过 1 次模型调用和 0 次工具调用后给出回答，共用 40 个 token。"
        );
    }

    #[test]
    fn an_answer_after_a_repeated_call_says_the_model_was_asked_to_answer() {
        let spent = Spent {
            iterations: 3,
            tokens: 900,
            ..Spent::default()
        };
        let (en, zh) = explain(
            &Stop::Answered,
            &Budget::default(),
            &spent,
            &["lookup_order".into()],
            &["lookup_order".into()],
        );
        assert_eq!(
            en,
            "The agent answered after 3 model calls and 1 tool call (lookup_order), using 900 \
             tokens; its model repeated a call it had already made (`lookup_order` with the same \
             arguments), so the tool was not run again and the model was asked to answer from \
             the earlier result."
        );
        assert_eq!(
            zh,
            "智能体经过 3 次模型调用和 1 次工具调用（lookup_order）后给出回答，共用 900 个 token；\
             模型重复了已做过的调用（`lookup_order`，参数相同），因此未再次运行该工具，\
             而是要求模型根据先前的结果作答。"
        );
    }

    #[test]
    fn a_budget_that_runs_out_before_the_answer_after_a_repeat_says_so() {
        let b = Budget {
            max_iterations: 2,
            ..Budget::default()
        };
        let spent = Spent {
            iterations: 2,
            tokens: 500,
            ..Spent::default()
        };
        let stop = Stop::Budget {
            bound: Bound::Iterations,
            doing: Doing::Answering("lookup_order".into()),
        };
        let (en, zh) = explain(
            &stop,
            &b,
            &spent,
            &["lookup_order".into()],
            &["lookup_order".into()],
        );
        assert!(
            en.contains(
                "ran out while it was about to answer from the earlier result of `lookup_order`"
            ),
            "{en}"
        );
        assert!(
            en.ends_with(
                "(`lookup_order` with the same arguments), so the tool was not run again."
            ),
            "{en}"
        );
        assert!(!en.contains("was asked to answer"), "{en}");
        assert!(
            zh.contains("当时正在准备根据 `lookup_order` 先前的结果作答"),
            "{zh}"
        );
        assert!(zh.ends_with("因此未再次运行该工具。"), "{zh}");
        assert_eq!(stop.status(), "budget_exhausted");
    }

    #[test]
    fn several_repeats_are_counted_and_each_tool_named_once() {
        let spent = Spent {
            iterations: 4,
            tokens: 10,
            ..Spent::default()
        };
        let (en, zh) = explain(
            &Stop::Answered,
            &Budget::default(),
            &spent,
            &["a".into(), "b".into()],
            &["a".into(), "b".into(), "a".into()],
        );
        assert!(
            en.contains(
                "its model repeated 3 calls it had already made (`a`, `b` with the same arguments)"
            ),
            "{en}"
        );
        assert!(
            zh.contains("模型重复了 3 次已做过的调用（`a`、`b`，参数相同）"),
            "{zh}"
        );
    }

    #[test]
    fn a_stop_on_a_repeated_call_names_the_tool_and_the_setting() {
        let spent = Spent {
            iterations: 2,
            tokens: 600,
            ..Spent::default()
        };
        let stop = Stop::Repeated {
            tool: "lookup_order".into(),
        };
        let (en, zh) = explain(
            &stop,
            &Budget::default(),
            &spent,
            &["lookup_order".into()],
            &["lookup_order".into()],
        );
        assert_eq!(
            en,
            "The agent stopped without an answer after 2 model calls and 1 tool call \
             (lookup_order): its model repeated a call it had already made (`lookup_order` with \
             the same arguments), and `on_repeat: stop` ends the loop there; it had used 600 \
             tokens."
        );
        assert!(
            zh.contains(
                "模型重复了已做过的调用（`lookup_order`，参数相同），`on_repeat: stop` 在此结束循环"
            ),
            "{zh}"
        );
        assert_eq!(stop.status(), "repeated_call");
    }
}
