//! Tools and structured answers for `llm_inference`: the OpenAI API's
//! `tools`, `tool_choice` and `response_format`, read once into an
//! [`Ask`]; for the local engine turned into instructions and a grammar
//! (constrained decoding, so the model can only write JSON of the asked
//! shape), and the model's JSON read back as OpenAI `tool_calls`.
//!
//! The local model answers in one JSON object: `{"name": TOOL,
//! "parameters": {...}}` to call a tool (Llama 3.1's JSON tool-call form),
//! `{"answer": TEXT}` to answer in words when `tool_choice` is `auto`.
//! `name` comes before `parameters` (the grammar writes properties in name
//! order), so the model picks the tool before its arguments.

use glassbox_models::grammar::{SchemaError, json_schema_to_gbnf};
use serde_json::{Value, json};

/// One callable tool: a function with a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// Which tool calls the model may or must make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Auto,
    None,
    Required,
    Named(String),
}

/// The shape of the answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    Text,
    JsonObject,
    JsonSchema { name: String, schema: Value },
}

/// Tools, tool choice and answer format, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub tools: Vec<Tool>,
    pub choice: Choice,
    pub format: Format,
    /// The values as given, for an OpenAI-compatible server.
    pub raw: RawAsk,
}

/// The OpenAI-shaped values an [`Ask`] was read from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawAsk {
    pub tools: Option<Value>,
    pub tool_choice: Option<Value>,
    pub response_format: Option<Value>,
}

/// What the local engine is given for an [`Ask`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalPlan {
    /// Appended to the system prompt: the tools and the reply's form.
    pub instructions: String,
    /// The grammar the reply must follow.
    pub grammar: String,
    /// Whether the reply is a tool call or answer object (else the answer
    /// itself is the JSON asked for).
    pub tool_reply: bool,
}

/// What the model replied, read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Text(String),
    /// OpenAI `tool_calls`: `[{"id", "type": "function", "function": {"name", "arguments"}}]`.
    ToolCalls(Vec<Value>),
}

impl Ask {
    /// Reads the three values (any may be absent); `Ok(None)` when they ask
    /// for nothing beyond text. Errors name the field and what is wrong.
    pub fn read(raw: RawAsk) -> Result<Option<Ask>, String> {
        let tools = match &raw.tools {
            None => Vec::new(),
            Some(v) => read_tools(v)?,
        };
        let choice = match &raw.tool_choice {
            None if tools.is_empty() => Choice::None,
            None => Choice::Auto,
            Some(v) => read_choice(v, &tools)?,
        };
        let format = match &raw.response_format {
            None => Format::Text,
            Some(v) => read_format(v)?,
        };
        if matches!(choice, Choice::Required | Choice::Named(_)) && tools.is_empty() {
            return Err("`tool_choice` asks for a tool call but no `tools` are given".into());
        }
        if choice == Choice::None && format == Format::Text {
            return Ok(None);
        }
        Ok(Some(Ask {
            tools,
            choice,
            format,
            raw,
        }))
    }

    /// The same ask offering only the tools named in `names` (an agent's
    /// tools retrieved for one question); the raw `tools` sent to an
    /// OpenAI-compatible server are cut alike.
    pub fn only(&self, names: &[String]) -> Ask {
        let keep = |name: &str| names.iter().any(|n| n == name);
        let mut ask = self.clone();
        ask.tools.retain(|t| keep(&t.name));
        if let Some(Value::Array(raw)) = &mut ask.raw.tools {
            raw.retain(|t| {
                t.pointer("/function/name")
                    .and_then(Value::as_str)
                    .is_some_and(keep)
            });
        }
        ask
    }

    /// Whether the model may call tools.
    pub fn calls_tools(&self) -> bool {
        self.choice != Choice::None && !self.tools.is_empty()
    }

    /// The instructions and grammar for the local engine.
    pub fn local_plan(&self) -> Result<LocalPlan, String> {
        let schema_error = |e: SchemaError| format!("{e}");
        if !self.calls_tools() {
            let schema = match &self.format {
                Format::JsonSchema { schema, .. } => schema.clone(),
                _ => json!({"type": "object"}),
            };
            let instructions = match &self.format {
                Format::JsonSchema { name, schema } => format!(
                    "Reply with one JSON object `{name}` that follows this JSON Schema: {schema}"
                ),
                _ => "Reply with one JSON object.".to_string(),
            };
            return Ok(LocalPlan {
                instructions,
                grammar: json_schema_to_gbnf(&schema).map_err(schema_error)?,
                tool_reply: false,
            });
        }
        let offered: Vec<&Tool> = match &self.choice {
            Choice::Named(n) => self.tools.iter().filter(|t| &t.name == n).collect(),
            _ => self.tools.iter().collect(),
        };
        let mut alts: Vec<Value> = offered
            .iter()
            .map(|t| {
                json!({
                    "type": "object",
                    "properties": {"name": {"const": t.name}, "parameters": t.parameters},
                    "required": ["name", "parameters"]
                })
            })
            .collect();
        let mut lines = vec!["You can call these tools:".to_string()];
        for t in &offered {
            lines.push(format!(
                "- {}: {} Parameters (JSON Schema): {}",
                t.name, t.description, t.parameters
            ));
        }
        lines.push(
            "To call a tool, reply with {\"name\": TOOL, \"parameters\": {...}}.".to_string(),
        );
        if self.choice == Choice::Auto {
            alts.push(json!({
                "type": "object",
                "properties": {"answer": {"type": "string"}},
                "required": ["answer"]
            }));
            lines.push(
                "When you can answer without a tool, reply with {\"answer\": TEXT}.".to_string(),
            );
        }
        let grammar = json_schema_to_gbnf(&json!({ "anyOf": alts }))
            .map_err(|e| format!("tool parameters: {e}"))?;
        Ok(LocalPlan {
            instructions: lines.join("\n"),
            grammar,
            tool_reply: true,
        })
    }

    /// A plan that allows only the answer, `{"answer": TEXT}`: no tool
    /// call (an agent's model that repeats a call it already made is then
    /// asked for its answer). Read back by [`Ask::reply`] as text.
    pub fn answer_plan() -> Result<LocalPlan, String> {
        let grammar = json_schema_to_gbnf(&json!({
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"]
        }))
        .map_err(|e| format!("{e}"))?;
        Ok(LocalPlan {
            instructions: "Reply with {\"answer\": TEXT}.".to_string(),
            grammar,
            tool_reply: true,
        })
    }

    /// Reads the local model's `text` back. `seq` makes call ids unique
    /// within a request (the span's attempt and position).
    pub fn reply(&self, plan: &LocalPlan, text: &str, seq: &str) -> Reply {
        if !plan.tool_reply {
            return Reply::Text(text.to_string());
        }
        let Ok(v) = serde_json::from_str::<Value>(text) else {
            // Cut off by `max_tokens`: an answer as far as it was written,
            // else the text as it stands.
            return Reply::Text(cut_answer(text).unwrap_or_else(|| text.to_string()));
        };
        if let Some(answer) = v.get("answer").and_then(Value::as_str) {
            return Reply::Text(answer.to_string());
        }
        match (v.get("name").and_then(Value::as_str), v.get("parameters")) {
            (Some(name), Some(args)) => {
                Reply::ToolCalls(vec![tool_call(&format!("call_{seq}_0"), name, args)])
            }
            _ => Reply::Text(text.to_string()),
        }
    }
}

/// The text of an answer object cut off inside its string (`{"answer":
/// "The order was shipp`) or before its closing brace, as far as it was
/// written; `None` for anything else (a cut-off tool call stays as it
/// stands).
fn cut_answer(text: &str) -> Option<String> {
    let rest = text.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix("\"answer\"")?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let mut chars = rest.strip_prefix('"')?.chars();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            // The string ended: cut before the closing brace, or not cut.
            '"' => return chars.as_str().trim().is_empty().then_some(out),
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                        Some(c) if hex.len() == 4 => out.push(c),
                        _ => break,
                    }
                }
                Some(c) => out.push(c),
                None => break,
            },
            c => out.push(c),
        }
    }
    Some(out.trim_end().to_string())
}

/// One OpenAI tool call; `arguments` is the JSON text of `args`.
pub fn tool_call(id: &str, name: &str, args: &Value) -> Value {
    json!({
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": args.to_string()}
    })
}

fn read_tools(v: &Value) -> Result<Vec<Tool>, String> {
    let list = v
        .as_array()
        .ok_or("`tools` must be an array of {\"type\": \"function\", \"function\": {...}}")?;
    let mut tools = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let at = format!("`tools[{i}]`");
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(format!("{at}: `type` must be `function`"));
        }
        let f = t
            .get("function")
            .ok_or(format!("{at}: `function` is missing"))?;
        let name = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| {
                !n.is_empty()
                    && n.len() <= 64
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
            .ok_or(format!(
                "{at}: `function.name` must be 1 to 64 letters, digits, `_` or `-`"
            ))?;
        if tools.iter().any(|x: &Tool| x.name == name) {
            return Err(format!("{at}: a second tool named `{name}`"));
        }
        let parameters = f
            .get("parameters")
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        json_schema_to_gbnf(&parameters).map_err(|e| format!("{at}.function.parameters: {e}"))?;
        tools.push(Tool {
            name: name.to_string(),
            description: f
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            parameters,
        });
    }
    Ok(tools)
}

fn read_choice(v: &Value, tools: &[Tool]) -> Result<Choice, String> {
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(Choice::Auto),
            "none" => Ok(Choice::None),
            "required" => Ok(Choice::Required),
            other => Err(format!(
                "`tool_choice` `{other}` is not one of `auto`, `none`, `required` or \
                 {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
            )),
        },
        Value::Object(_) => {
            let name = v
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or("`tool_choice.function.name` is missing")?;
            if !tools.iter().any(|t| t.name == name) {
                return Err(format!(
                    "`tool_choice` names `{name}`, which is not among `tools`"
                ));
            }
            Ok(Choice::Named(name.to_string()))
        }
        _ => Err("`tool_choice` must be a string or an object".into()),
    }
}

fn read_format(v: &Value) -> Result<Format, String> {
    match v.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Format::Text),
        Some("json_object") => Ok(Format::JsonObject),
        Some("json_schema") => {
            let js = v
                .get("json_schema")
                .ok_or("`response_format.json_schema` is missing")?;
            let schema = js
                .get("schema")
                .cloned()
                .ok_or("`response_format.json_schema.schema` is missing")?;
            json_schema_to_gbnf(&schema)
                .map_err(|e| format!("`response_format.json_schema.schema`: {e}"))?;
            Ok(Format::JsonSchema {
                name: js
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("answer")
                    .to_string(),
                schema,
            })
        }
        _ => {
            Err("`response_format.type` must be `text`, `json_object` or `json_schema`".to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!([{"type": "function", "function": {
            "name": "weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }}])
    }

    fn ask(tools: Option<Value>, choice: Option<Value>, format: Option<Value>) -> Option<Ask> {
        Ask::read(RawAsk {
            tools,
            tool_choice: choice,
            response_format: format,
        })
        .unwrap()
    }

    #[test]
    fn only_keeps_the_named_tools_in_the_plan_and_the_raw_tools() {
        let mut two = weather();
        two.as_array_mut().unwrap().push(json!({"type": "function", "function": {
            "name": "clock", "description": "The time.", "parameters": {"type": "object", "properties": {}}
        }}));
        let a = ask(Some(two), None, None).unwrap();
        let only = a.only(&["clock".to_string()]);
        assert_eq!(only.tools.len(), 1);
        assert_eq!(only.tools[0].name, "clock");
        assert_eq!(
            only.raw.tools.as_ref().unwrap().as_array().unwrap().len(),
            1
        );
        let plan = only.local_plan().unwrap();
        assert!(plan.instructions.contains("- clock: The time."));
        assert!(
            !plan.instructions.contains("weather"),
            "{}",
            plan.instructions
        );
        assert!(!plan.grammar.contains("weather"), "{}", plan.grammar);
    }

    #[test]
    fn nothing_asked_is_plain_text() {
        assert_eq!(ask(None, None, None), None);
        assert_eq!(ask(Some(weather()), Some(json!("none")), None), None);
        assert_eq!(ask(None, None, Some(json!({"type": "text"}))), None);
    }

    #[test]
    fn auto_offers_the_tools_and_an_answer() {
        let a = ask(Some(weather()), None, None).unwrap();
        assert_eq!(a.choice, Choice::Auto);
        let plan = a.local_plan().unwrap();
        assert!(plan.tool_reply);
        assert!(
            plan.instructions
                .contains("- weather: The weather in a city.")
        );
        assert!(plan.instructions.contains("{\"answer\": TEXT}"));
        assert!(
            plan.grammar.contains(r#""\"weather\"""#),
            "{}",
            plan.grammar
        );
        assert!(plan.grammar.contains(r#""\"answer\"""#), "{}", plan.grammar);
        let call = a.reply(
            &plan,
            r#"{"name": "weather", "parameters": {"city": "Oslo"}}"#,
            "1",
        );
        let Reply::ToolCalls(calls) = call else {
            panic!("{call:?}")
        };
        assert_eq!(calls[0]["function"]["name"], "weather");
        assert_eq!(calls[0]["function"]["arguments"], r#"{"city":"Oslo"}"#);
        assert_eq!(calls[0]["type"], "function");
        assert_eq!(calls[0]["id"], "call_1_0");
        assert_eq!(
            a.reply(&plan, r#"{"answer": "Sunny."}"#, "1"),
            Reply::Text("Sunny.".into())
        );
        assert_eq!(
            a.reply(&plan, r#"{"name": "weath"#, "1"),
            Reply::Text(r#"{"name": "weath"#.into()),
            "cut off: the text as it stands"
        );
        assert_eq!(
            a.reply(
                &plan,
                "{\n  \"answer\": \"Step 1: \\\"fill\\\" it.\\nStep 2: b",
                "1"
            ),
            Reply::Text("Step 1: \"fill\" it.\nStep 2: b".into()),
            "an answer cut off in its string: as far as it was written"
        );
        assert_eq!(
            a.reply(&plan, r#"{"answer": "done", "x"#, "1"),
            Reply::Text(r#"{"answer": "done", "x"#.into()),
            "cut off after the answer's string: the text as it stands"
        );
        assert_eq!(
            a.reply(&plan, r#"{"answer": "shipped""#, "1"),
            Reply::Text("shipped".into()),
            "cut off before the closing brace"
        );
    }

    #[test]
    fn the_answer_plan_allows_only_an_answer_and_reads_it_as_text() {
        let plan = Ask::answer_plan().unwrap();
        assert!(plan.tool_reply);
        assert!(plan.grammar.contains(r#""\"answer\"""#), "{}", plan.grammar);
        assert!(!plan.grammar.contains(r#""\"name\"""#), "{}", plan.grammar);
        assert!(!plan.grammar.contains("parameters"), "{}", plan.grammar);
        let a = ask(Some(weather()), None, None).unwrap();
        assert_eq!(
            a.reply(&plan, r#"{"answer": "Sunny in Oslo."}"#, "1"),
            Reply::Text("Sunny in Oslo.".into())
        );
    }

    #[test]
    fn required_and_named_leave_no_answer_alternative() {
        let a = ask(Some(weather()), Some(json!("required")), None).unwrap();
        let plan = a.local_plan().unwrap();
        assert!(!plan.grammar.contains("answer"), "{}", plan.grammar);
        let named = json!({"type": "function", "function": {"name": "weather"}});
        let a = ask(Some(weather()), Some(named), None).unwrap();
        assert_eq!(a.choice, Choice::Named("weather".into()));
        let wrong = json!({"type": "function", "function": {"name": "time"}});
        let e = Ask::read(RawAsk {
            tools: Some(weather()),
            tool_choice: Some(wrong),
            response_format: None,
        })
        .unwrap_err();
        assert!(e.contains("`time`, which is not among `tools`"), "{e}");
    }

    #[test]
    fn a_json_schema_format_constrains_the_answer_itself() {
        let f = json!({"type": "json_schema", "json_schema": {"name": "city", "schema":
            {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
        let a = ask(None, None, Some(f)).unwrap();
        let plan = a.local_plan().unwrap();
        assert!(!plan.tool_reply);
        assert!(plan.instructions.contains("`city`"));
        assert!(plan.grammar.contains(r#""\"name\"""#));
        assert_eq!(
            a.reply(&plan, r#"{"name":"Oslo"}"#, "1"),
            Reply::Text(r#"{"name":"Oslo"}"#.into())
        );
        let obj = ask(None, None, Some(json!({"type": "json_object"}))).unwrap();
        assert!(
            obj.local_plan()
                .unwrap()
                .grammar
                .starts_with("root ::= object")
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        let read = |tools: Value, choice: Option<Value>, format: Option<Value>| {
            Ask::read(RawAsk {
                tools: Some(tools),
                tool_choice: choice,
                response_format: format,
            })
            .unwrap_err()
        };
        let e = read(json!({}), None, None);
        assert!(e.contains("`tools` must be an array"), "{e}");
        let e = read(
            json!([{"type": "function", "function": {"name": "a b"}}]),
            None,
            None,
        );
        assert!(e.contains("`tools[0]`: `function.name`"), "{e}");
        let e = read(
            json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}}}]),
            None,
            None,
        );
        assert!(
            e.contains("`tools[0]`.function.parameters: $.properties.x"),
            "{e}"
        );
        let e = read(weather(), Some(json!("always")), None);
        assert!(e.contains("`always`"), "{e}");
        let e = read(json!([]), Some(json!("required")), None);
        assert!(e.contains("no `tools`"), "{e}");
        let e = read(json!([]), None, Some(json!({"type": "yaml"})));
        assert!(e.contains("`response_format.type`"), "{e}");
    }
}
