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
}

/// What an agent was doing when a budget stopped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// Nothing yet: the first model call had not started.
    Starting,
    /// About to give the model the result of this tool.
    Using(String),
}

impl Doing {
    fn en(&self) -> String {
        match self {
            Self::Starting => "about to make its first model call".into(),
            Self::Using(tool) => format!("using the result of `{tool}`"),
        }
    }

    fn zh(&self) -> String {
        match self {
            Self::Starting => "准备进行第一次模型调用".into(),
            Self::Using(tool) => format!("处理 `{tool}` 的结果"),
        }
    }
}

impl Stop {
    /// The run's status, as the output's `status` and the node's label.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Budget { .. } => "budget_exhausted",
        }
    }
}

/// The run in plain words, English and Chinese: how many model and tool
/// calls, which tools, tokens used, and why it stopped.
pub fn explain(stop: &Stop, budget: &Budget, spent: &Spent, tools: &[String]) -> (String, String) {
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
    match stop {
        Stop::Answered => (
            format!(
                "The agent answered after {n} {model_calls} and {calls} {tool_calls}{list}, \
                 using {} tokens.",
                spent.tokens
            ),
            format!(
                "智能体经过 {n} 次模型调用和 {calls} 次工具调用{list_zh}后给出回答，共用 {} 个 token。",
                spent.tokens
            ),
        ),
        Stop::Budget { bound, doing } => {
            let limit = budget.limit(*bound);
            let (doing, doing_zh) = (doing.en(), doing.zh());
            (
                format!(
                    "The agent stopped without an answer after {n} {model_calls} and {calls} \
                     {tool_calls}{list}: its {} budget (`{}` {limit}) ran out while it was \
                     {doing}; it had used {} tokens.",
                    bound.en(),
                    bound.field(),
                    spent.tokens
                ),
                format!(
                    "智能体经过 {n} 次模型调用和 {calls} 次工具调用{list_zh}后未能作答而停止：\
                     {}预算（`{}` {limit}）已用完，当时正在{doing_zh}；共用 {} 个 token。",
                    bound.zh(),
                    bound.field(),
                    spent.tokens
                ),
            )
        }
    }
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
        let (en, zh) = explain(&stop, &b, &spent, &["search_kb".into(), "search_kb".into()]);
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
            let (en, zh) = explain(&stop, &b, &spent, &["lookup_order".into()]);
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
        let (en, zh) = explain(&Stop::Answered, &Budget::default(), &spent, &[]);
        assert_eq!(
            en,
            "The agent answered after 1 model call and 0 tool calls, using 40 tokens."
        );
        assert_eq!(
            zh,
            "智能体经过 1 次模型调用和 0 次工具调用后给出回答，共用 40 个 token。"
        );
    }
}
