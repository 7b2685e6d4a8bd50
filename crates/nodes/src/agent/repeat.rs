//! Repeated tool calls: a small model, even constrained to valid calls,
//! tends to make the same call again instead of answering from its
//! result, and so runs its loop to the bound. The agent keeps the calls it
//! made in a run ([`Calls`]); a call identical to one of them (same tool,
//! same arguments) is handled as `on_repeat` says ([`OnRepeat`]). Pure:
//! the loop asks [`Calls::earlier`] before it runs a tool.

use serde_json::Value;

/// What an agent does when its model repeats a tool call it already made
/// in this run (the `on_repeat` config field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnRepeat {
    /// Do not run the tool again: the earlier result is the observation,
    /// and the next model call may only answer (its grammar, or
    /// `tool_choice: none`, allows no tool call).
    #[default]
    Answer,
    /// Run the tool again, as for any call.
    Run,
    /// End the loop without an answer, status `repeated_call`.
    Stop,
}

/// The values of `on_repeat`, as written.
pub const ON_REPEAT: &[(&str, OnRepeat)] = &[
    ("answer", OnRepeat::Answer),
    ("run", OnRepeat::Run),
    ("stop", OnRepeat::Stop),
];

/// A tool call made in this run, with what it gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Made {
    pub tool: String,
    pub arguments: Value,
    /// The number of its step in the output's `steps`.
    pub step: usize,
    pub observation: String,
    pub ok: bool,
}

/// The tool calls a run has made, in order.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    made: Vec<Made>,
}

impl Calls {
    /// The earlier call identical to this one: the same tool with equal
    /// arguments (JSON equality: the order of an object's keys does not
    /// matter, `1` and `1.0` differ).
    pub fn earlier(&self, tool: &str, arguments: &Value) -> Option<&Made> {
        self.made
            .iter()
            .find(|m| m.tool == tool && &m.arguments == arguments)
    }

    /// The calls that ran, first to last.
    pub fn all(&self) -> &[Made] {
        &self.made
    }

    /// Keeps a call that ran.
    pub fn record(&mut self, made: Made) {
        self.made.push(made);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn made(tool: &str, arguments: Value, step: usize) -> Made {
        Made {
            tool: tool.into(),
            arguments,
            step,
            observation: format!("result of step {step}"),
            ok: true,
        }
    }

    #[test]
    fn the_same_tool_with_the_same_arguments_is_a_repeat_of_the_first_such_call() {
        let mut calls = Calls::default();
        assert_eq!(
            calls.earlier("lookup_order", &json!({"order_id": 1042})),
            None
        );
        calls.record(made("lookup_order", json!({"order_id": 1042}), 2));
        calls.record(made("search_kb", json!({"query": "descale"}), 4));
        let again = calls.earlier("lookup_order", &json!({"order_id": 1042}));
        assert_eq!(again.map(|m| m.step), Some(2));
        assert_eq!(
            again.map(|m| m.observation.as_str()),
            Some("result of step 2")
        );
        assert_eq!(
            calls
                .earlier("search_kb", &json!({"query": "descale"}))
                .map(|m| m.step),
            Some(4)
        );
    }

    #[test]
    fn other_arguments_or_another_tool_are_not_a_repeat() {
        let mut calls = Calls::default();
        calls.record(made("lookup_order", json!({"order_id": 1042}), 2));
        assert_eq!(
            calls.earlier("lookup_order", &json!({"order_id": 1043})),
            None
        );
        assert_eq!(
            calls.earlier("lookup_order", &json!({"order_id": "1042"})),
            None
        );
        assert_eq!(calls.earlier("lookup_order", &json!({})), None);
        assert_eq!(calls.earlier("search_kb", &json!({"order_id": 1042})), None);
    }

    #[test]
    fn the_order_of_argument_keys_does_not_make_a_call_new() {
        let mut calls = Calls::default();
        let first: Value = serde_json::from_str(r#"{"a": 1, "b": [2, 3]}"#).unwrap();
        calls.record(made("t", first, 2));
        let second: Value = serde_json::from_str(r#"{"b": [2, 3], "a": 1}"#).unwrap();
        assert!(calls.earlier("t", &second).is_some());
        let reordered_list: Value = serde_json::from_str(r#"{"b": [3, 2], "a": 1}"#).unwrap();
        assert!(calls.earlier("t", &reordered_list).is_none());
    }

    #[test]
    fn on_repeat_names_every_mode_once() {
        let names: Vec<&str> = ON_REPEAT.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["answer", "run", "stop"]);
        assert_eq!(OnRepeat::default(), OnRepeat::Answer);
    }
}
