//! Answers wait for their trace's commit (`[store] durability = "commit"`,
//! the default): a run whose trace cannot be stored is answered 503
//! `trace_not_stored`, never 200; with `durability = "async"` it is still
//! answered 200 (the documented risk of opting out).

use glassbox_server::Config;
use glassbox_store::TraceStore;
use serde_json::json;

use crate::support::{MODERATION, TestServer};

const RUN: &str = "/v1/topologies/moderation/runs";

/// Renames the `requests` table under the running server: every later
/// commit of the trace writer fails.
fn break_the_store(s: &TestServer) {
    rusqlite::Connection::open(&s.store)
        .unwrap()
        .execute_batch("ALTER TABLE requests RENAME TO requests_away")
        .unwrap();
}

fn chat(stream: bool) -> String {
    json!({
        "model": "moderation",
        "stream": stream,
        "messages": [{"role": "user", "content": "What is the price of Pro?"}]
    })
    .to_string()
}

#[test]
fn an_answer_whose_trace_cannot_be_stored_is_503_not_200() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let ok = s.post(RUN, None, r#"{"question": "hello"}"#);
    assert_eq!(ok.status, 200, "{}", ok.text);
    // Answered means stored: another connection sees it right away.
    let id = ok.json()["request_id"].as_str().unwrap().to_owned();
    let stored = glassbox_store::SqliteStore::open(&s.store)
        .unwrap()
        .get(id.parse().unwrap())
        .unwrap();
    assert!(
        stored.is_some(),
        "request {id} was answered before its commit"
    );

    break_the_store(&s);
    let r = s.post(RUN, None, r#"{"question": "hello"}"#);
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "trace_not_stored"),
        "{}",
        r.text
    );
    assert!(r.header("retry-after").is_some());
    let r = s.post("/v1/chat/completions", None, &chat(false));
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "trace_not_stored"),
        "{}",
        r.text
    );
    // A stream has already said 200: it ends with an error event instead
    // of its answer.
    let r = s.post("/v1/chat/completions", None, &chat(true));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("trace_not_stored"), "{}", r.text);
    assert!(!r.text.contains("\"stop\""), "{}", r.text);
    assert!(r.text.trim_end().ends_with("data: [DONE]"), "{}", r.text);
    // The failed writes are reported at shutdown too.
    let err = s.stop_result().unwrap_err();
    assert!(err.contains("could not be written"), "{err}");
}

#[test]
fn with_durability_async_answers_do_not_wait_for_the_store() {
    let config = Config::parse("[store]\ndurability = \"async\"").unwrap();
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], config);
    break_the_store(&s);
    let r = s.post(RUN, None, r#"{"question": "hello"}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    let r = s.post("/v1/chat/completions", None, &chat(false));
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(s.stop_result().is_err());
}
