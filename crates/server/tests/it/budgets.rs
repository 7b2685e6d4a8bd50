//! Issue 33, F6: a template is code a topology author wrote, run on the
//! server's CPU. One with two nested `range(100000)` loops (under
//! `timeout_ms: 2000`, `deadline_ms: 3000`) gave no answer after 20 s, wrote
//! no trace, kept two threads at 100% until restart, and every other
//! template on the server (other topologies included) hung meanwhile.

use std::time::Duration;

use glassbox_server::Config;
use serde_json::{Value, json};

use crate::support::{MODERATION, TestServer};

/// The topology from the report.
const BOMB: &str = r#"topology_id: bomb
version: 1.0.0
defaults: { timeout_ms: 2000, deadline_ms: 3000 }
nodes:
  - id: spin
    type: template
    resource: { type: cpu, cost_per_call: 0.0001 }
    config:
      template: "{% for i in range(100000) %}{% for j in range(100000) %}{{ i * j }}{% endfor %}{% endfor %}"
"#;

/// The same loops with no output: only the CPU budget or the timeout can
/// stop it.
const SILENT: &str = r#"topology_id: silent
version: 1.0.0
defaults: { timeout_ms: 2000, deadline_ms: 3000 }
nodes:
  - id: spin
    type: template
    resource: { type: cpu, cost_per_call: 0.0001 }
    config:
      template: "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}done"
"#;

/// A client that gives up long after every limit in play (the report
/// waited 20 s): an answer that never comes fails the test instead of
/// hanging it. Not a timing assertion.
fn post(base: &str, topology: &str, body: &Value) -> Result<(u16, Value), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into();
    let mut resp = agent
        .post(format!("{base}/v1/topologies/{topology}/runs"))
        .content_type("application/json")
        .send(body.to_string())
        .map_err(|e| format!("{topology}: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| e.to_string())?;
    Ok((
        status,
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?,
    ))
}

#[test]
fn a_runaway_template_ends_with_a_budget_error_and_stalls_no_one() {
    let s = TestServer::start(
        &[
            ("bomb.yaml", BOMB),
            ("silent.yaml", SILENT),
            ("moderation.yaml", MODERATION),
        ],
        Config::default(),
    );
    let base = s.base.clone();
    std::thread::scope(|scope| {
        // Three runaway requests at once: more than the server's two async
        // workers, so a render on them would stall everyone.
        let runaways: Vec<_> = ["bomb", "silent", "bomb"]
            .into_iter()
            .map(|t| {
                let base = base.clone();
                scope.spawn(move || (t, post(&base, t, &json!({"question": "hi"}))))
            })
            .collect();
        // Meanwhile, four clients ask the moderation example its real
        // questions: every one is answered normally.
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let base = base.clone();
                scope.spawn(move || {
                    let questions = [
                        "What is the price of Pro?",
                        "Does Pro cost extra per seat?",
                        "How do I reset my password?",
                    ];
                    questions
                        .iter()
                        .map(|q| post(&base, "moderation", &json!({"question": q})))
                        .map(|r| r.map(|(status, body)| (c, status, body)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for client in clients {
            for answer in client.join().unwrap() {
                let (c, status, body) = answer.unwrap();
                assert_eq!(status, 200, "client {c}: {body}");
                assert!(
                    body["output"].is_object() || body["output"].is_string(),
                    "{body}"
                );
            }
        }
        for runaway in runaways {
            let (t, answer) = runaway.join().unwrap();
            let (status, body) = answer.unwrap();
            assert_ne!(status, 200, "{t}: {body}");
            let error = body["error"].to_string();
            assert!(
                error.contains("budget")
                    || error.contains("timed out")
                    || error.contains("deadline"),
                "{t}: {body}"
            );
            // The failed request left its trace, with the failing span.
            let id = body["request_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{t}: no request id in {body}"));
            let trace = s.get(&format!("/v1/traces/{id}"), None);
            assert_eq!(trace.status, 200, "{t}: {}", trace.text);
            assert!(trace.text.contains("spin"), "{}", trace.text);
        }
    });
}
