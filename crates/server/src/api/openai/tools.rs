//! Tool calling and structured answers on `POST /v1/chat/completions`:
//! the request's `tools`, `tool_choice` and `response_format` are checked
//! here (a bad one is a 400 naming the field before anything runs) and
//! handed to the topology's LLM nodes (`RunOptions::model_ask`); an LLM
//! that answers with tool calls puts OpenAI `tool_calls` in its output,
//! which go back as the assistant message's `tool_calls` (content `null`,
//! finish reason `tool_calls`), or streamed as one `tool_calls` delta.
//!
//! With tools, the topology's input carries the conversation
//! (`messages`, tool results included) beside `question`, so the model
//! sees what its tools answered.

use std::sync::Arc;

use glassbox_engine::ModelAsk;
use glassbox_nodes::llm::tools::{Ask, RawAsk};
use serde_json::{Value, json};

use crate::error::ApiError;

/// The caller's ask, checked; `None` when there is none (`tool_choice:
/// none` with tools is still an ask: the conversation goes to the model).
pub fn model_ask(
    tools: Option<&Value>,
    tool_choice: Option<&Value>,
    response_format: Option<&Value>,
) -> Result<Option<Arc<ModelAsk>>, ApiError> {
    let ask = ModelAsk {
        tools: tools.filter(|v| !v.is_null()).cloned(),
        tool_choice: tool_choice.filter(|v| !v.is_null()).cloned(),
        response_format: response_format.filter(|v| !v.is_null()).cloned(),
    };
    if ask.is_empty() {
        return Ok(None);
    }
    Ask::read(RawAsk {
        tools: ask.tools.clone(),
        tool_choice: ask.tool_choice.clone(),
        response_format: ask.response_format.clone(),
    })
    .map_err(|e| {
        ApiError::bad_request("bad_input", e)
            .hint("`tools`, `tool_choice` and `response_format` take the OpenAI API's shapes")
    })?;
    Ok(Some(Arc::new(ask)))
}

/// Whether the ask brings tools (then the input carries the conversation).
pub fn offers_tools(ask: Option<&ModelAsk>) -> bool {
    ask.and_then(|a| a.tools.as_ref())
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

/// The tool calls in a topology's output, if its answer is one.
pub fn tool_calls(output: &Value) -> Option<&Vec<Value>> {
    output
        .get("tool_calls")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
}

/// A streamed `tool_calls` delta: each call with its `index`.
pub fn delta(calls: &[Value]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            c["index"] = json!(i);
            c
        })
        .collect();
    json!({ "tool_calls": calls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_ask_is_a_400_naming_the_field() {
        let e = model_ask(Some(&json!({})), None, None).unwrap_err();
        assert_eq!(e.code, "bad_input");
        assert!(e.message.contains("`tools`"), "{}", e.message);
        assert!(model_ask(None, None, None).unwrap().is_none());
        let empty = model_ask(Some(&json!([])), None, None).unwrap();
        assert!(!offers_tools(empty.as_deref()));
    }

    #[test]
    fn streamed_calls_carry_their_index() {
        let d = delta(&[json!({"id": "a"}), json!({"id": "b"})]);
        assert_eq!(d["tool_calls"][1]["index"], 1);
        assert_eq!(tool_calls(&json!({"tool_calls": []})), None);
    }
}
