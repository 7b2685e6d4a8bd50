//! A conversation with tool calls, as the model sees it.
//!
//! When a caller brings tools, the request's input may carry the whole
//! conversation (`input.messages`, OpenAI's shapes: assistant turns with
//! `tool_calls`, `tool` turns with results). A remote server reads those
//! shapes itself; the local chat template knows only system, user and
//! assistant turns, so a tool call becomes the assistant's JSON (the form
//! the grammar makes it write) and a tool result a user turn naming the
//! tool.

use glassbox_models::ChatMessage;
use serde_json::{Value, json};

/// The conversation in `input.messages` for the local model, system turns
/// left out (the node's `system` prompt speaks for the topology). `None`
/// when the input has no conversation.
pub fn local(input: &Value) -> Option<Vec<ChatMessage>> {
    let turns = input.get("messages")?.as_array()?;
    let mut names = Vec::<(String, String)>::new();
    let mut out = Vec::with_capacity(turns.len());
    for t in turns {
        let content = text(t.get("content"));
        match t.get("role").and_then(Value::as_str) {
            Some("user") => out.push(ChatMessage::user(content)),
            Some("assistant") => {
                let calls = t.get("tool_calls").and_then(Value::as_array);
                match calls.and_then(|c| c.first()) {
                    Some(call) => {
                        let name = call
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        let args = call
                            .pointer("/function/arguments")
                            .and_then(Value::as_str)
                            .and_then(|a| serde_json::from_str::<Value>(a).ok())
                            .unwrap_or_else(|| json!({}));
                        if let Some(id) = call.get("id").and_then(Value::as_str) {
                            names.push((id.to_string(), name.to_string()));
                        }
                        out.push(ChatMessage::assistant(
                            json!({"name": name, "parameters": args}).to_string(),
                        ));
                    }
                    None => out.push(ChatMessage::assistant(content)),
                }
            }
            Some("tool") => {
                let id = t.get("tool_call_id").and_then(Value::as_str);
                let name = names
                    .iter()
                    .find(|(i, _)| Some(i.as_str()) == id)
                    .map_or("the tool", |(_, n)| n.as_str());
                out.push(ChatMessage::user(format!("Result of `{name}`: {content}")));
            }
            _ => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The text of a message's content (a string, or text parts).
fn text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The conversation for an OpenAI-compatible server: as given, after the
/// node's system prompt, the caller's own system turns left out.
pub fn remote(input: &Value, system: Option<&str>) -> Option<Value> {
    let turns = input.get("messages")?.as_array()?;
    let mut out: Vec<Value> = system
        .map(|s| json!({"role": "system", "content": s}))
        .into_iter()
        .collect();
    out.extend(
        turns
            .iter()
            .filter(|t| t.get("role").and_then(Value::as_str) != Some("system"))
            .cloned(),
    );
    Some(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use glassbox_models::Role;

    use super::*;

    fn conversation() -> Value {
        json!({"question": "weather in Oslo?", "messages": [
            {"role": "system", "content": "caller's system"},
            {"role": "user", "content": "weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}
        ]})
    }

    #[test]
    fn tool_turns_become_json_and_named_results_locally() {
        let m = local(&conversation()).unwrap();
        let roles: Vec<Role> = m.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
        assert_eq!(
            m[1].content,
            r#"{"name":"weather","parameters":{"city":"Oslo"}}"#
        );
        assert_eq!(m[2].content, "Result of `weather`: sunny, 21 C");
        assert_eq!(local(&json!({"question": "x"})), None);
    }

    #[test]
    fn a_remote_server_gets_the_turns_as_given_after_the_node_system() {
        let m = remote(&conversation(), Some("be brief")).unwrap();
        assert_eq!(m[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(m.as_array().unwrap().len(), 4);
        assert_eq!(m[3]["role"], "tool");
    }
}
