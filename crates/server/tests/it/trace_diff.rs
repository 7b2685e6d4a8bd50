//! `GET /v1/traces/{a}/diff/{b}`: two runs of the moderation example that
//! take different branches; the diff names the router as where they part.

use glassbox_server::Config;
use serde_json::json;

use crate::support::{MODERATION, TestServer};

#[test]
fn the_diff_endpoint_names_the_first_divergence_in_both_languages() {
    let s = TestServer::start(&[("moderation.yaml", MODERATION)], Config::default());
    let run = |q: &str| {
        let r = s.post(
            "/v1/topologies/moderation/runs",
            None,
            &json!({ "question": q }).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()["request_id"].as_str().unwrap().to_string()
    };
    let pricing = run("What is the price of Pro?");
    let abuse = run("you idiot");

    let r = s.get(&format!("/v1/traces/{pricing}/diff/{abuse}"), None);
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["lang"], "en");
    let first = &body["diff"]["first_divergence"];
    assert_eq!(first["kind"], "label", "{body}");
    assert_eq!(first["node"], "route");
    assert_eq!(first["a"], "pricing");
    assert_eq!(first["b"], "abuse");
    let text = body["explanation"].as_str().unwrap();
    assert!(text.contains("part at `route`"), "{text}");
    assert!(text.contains("only B ran `refuse`"), "{text}");
    let nodes = body["diff"]["nodes"].as_array().unwrap();
    let refuse = nodes.iter().find(|n| n["node"] == "refuse").unwrap();
    assert_eq!(refuse["differs"], true);
    assert_eq!(refuse["b"]["status"], "succeeded");
    assert_eq!(
        body["diff"]["a"]["path"],
        json!(["route", "pricing_answer", "check"])
    );

    let zh = s.get(&format!("/v1/traces/{pricing}/diff/{abuse}?lang=zh"), None);
    assert_eq!(zh.status, 200, "{}", zh.text);
    assert!(zh.json()["explanation"].as_str().unwrap().contains("分道"));

    let bad = s.get(&format!("/v1/traces/{pricing}/diff/{abuse}?lang=fr"), None);
    assert_eq!((bad.status, bad.code().as_str()), (400, "bad_query"));
    let missing = s.get(
        &format!("/v1/traces/{pricing}/diff/00000000-0000-0000-0000-000000000000"),
        None,
    );
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (404, "trace_not_found")
    );
}
