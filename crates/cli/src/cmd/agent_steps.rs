//! `glassbox run`'s table of an agent's steps: each model and tool call
//! (and each tool call the model repeated, answered from the earlier
//! step, and the tools picked for the question with `tool_retrieval`)
//! with its iteration, what it did, its tokens, cost and time, then why
//! the loop stopped. Shown when the answer came from an `agent` node
//! (its output carries `steps` and `status`).

use serde_json::Value;

use crate::out::table::Table;

/// The "Agent steps" section, or nothing when `output` is not an agent's.
pub fn render(output: &Value) -> String {
    let (Some(steps), Some(status)) = (
        output.get("steps").and_then(Value::as_array),
        output.get("status").and_then(Value::as_str),
    ) else {
        return String::new();
    };
    let num = |s: &Value, k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let rows: Vec<Vec<String>> = steps
        .iter()
        .map(|s| {
            let kind = s.get("kind").and_then(Value::as_str).unwrap_or_default();
            let what = match kind {
                "tool" => format!(
                    "{}({}) → {}",
                    s.get("tool").and_then(Value::as_str).unwrap_or_default(),
                    s.get("arguments").map(Value::to_string).unwrap_or_default(),
                    cut(s
                        .get("observation")
                        .and_then(Value::as_str)
                        .unwrap_or_default())
                ),
                "repeat" => format!(
                    "{}({}) again: not run, answered from step {}",
                    s.get("tool").and_then(Value::as_str).unwrap_or_default(),
                    s.get("arguments").map(Value::to_string).unwrap_or_default(),
                    num(s, "repeat_of")
                ),
                "pick" => {
                    let names = |k: &str| -> String {
                        s.get(k)
                            .and_then(Value::as_array)
                            .map(|a| {
                                a.iter()
                                    .map(|t| {
                                        format!(
                                            "{} {:.2}",
                                            t.get("tool").and_then(Value::as_str).unwrap_or("?"),
                                            num(t, "similarity")
                                        )
                                    })
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_default()
                    };
                    format!(
                        "offered {}; not offered {}",
                        names("offered"),
                        names("left_out")
                    )
                }
                _ => cut(s.get("reply").and_then(Value::as_str).unwrap_or_default()),
            };
            let tokens = if kind == "model" {
                format!("{}/{}", num(s, "tokens_in"), num(s, "tokens_out"))
            } else {
                "-".into()
            };
            vec![
                num(s, "step").to_string(),
                num(s, "iteration").to_string(),
                kind.to_string(),
                what,
                tokens,
                format!("{:.6}", num(s, "cost")),
                format!("{:.0}", num(s, "ms")),
            ]
        })
        .collect();
    let mut out = String::from("\nAgent steps\n");
    out.push_str(
        &Table::new(&[
            "STEP",
            "ITER",
            "KIND",
            "WHAT",
            "TOKENS IN/OUT",
            "COST",
            "TOOK ms",
        ])
        .indent("  ")
        .rows(rows)
        .render(),
    );
    out.push_str(&format!(
        "  stopped: {status}{}\n",
        output
            .get("stopped_by")
            .and_then(Value::as_str)
            .map(|b| format!(" (`{b}`)"))
            .unwrap_or_default()
    ));
    out
}

/// One line of at most 60 characters.
fn cut(text: &str) -> String {
    let line = text.replace('\n', " ");
    match line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_agent_output_gets_its_steps_and_why_it_stopped() {
        let out = json!({"text": "x", "status": "budget_exhausted", "stopped_by": "max_iterations", "steps": [
            {"step": 1, "iteration": 1, "kind": "model", "tokens_in": 200, "tokens_out": 20, "cost": 0.001, "ms": 900.0, "reply": "{\"name\":\"lookup_order\"}"},
            {"step": 2, "iteration": 1, "kind": "tool", "tool": "lookup_order", "arguments": {"order_id": 7}, "observation": "Order 7: shipped", "cost": 0.0, "ms": 3.0}
        ]});
        let text = render(&out);
        assert!(text.contains("Agent steps"), "{text}");
        assert!(
            text.contains(r#"lookup_order({"order_id":7}) → Order 7: shipped"#),
            "{text}"
        );
        assert!(text.contains("200/20"), "{text}");
        assert!(
            text.contains("stopped: budget_exhausted (`max_iterations`)"),
            "{text}"
        );
        assert_eq!(render(&json!({"text": "plain"})), "");
    }

    #[test]
    fn the_tools_picked_for_the_question_are_shown_with_their_similarity() {
        let out = json!({"text": "x", "status": "answered", "steps": [
            {"step": 1, "iteration": 1, "kind": "pick", "offered": [{"tool": "search_kb", "similarity": 0.4123}],
             "left_out": [{"tool": "lookup_order", "similarity": 0.05}], "cost": 0.0, "ms": 4.0}
        ]});
        let text = render(&out);
        assert!(
            text.contains("offered search_kb 0.41; not offered lookup_order 0.05"),
            "{text}"
        );
    }

    #[test]
    fn a_repeated_call_names_the_step_that_answered_it() {
        let out = json!({"text": "shipped", "status": "answered", "stopped_by": null, "steps": [
            {"step": 4, "iteration": 2, "kind": "repeat", "tool": "lookup_order", "arguments": {"order_id": 7}, "repeat_of": 2, "observation": "Order 7: shipped", "cost": 0.0, "ms": 0.0}
        ]});
        let text = render(&out);
        assert!(
            text.contains(r#"lookup_order({"order_id":7}) again: not run, answered from step 2"#),
            "{text}"
        );
        assert!(text.contains("stopped: answered\n"), "{text}");
    }
}
