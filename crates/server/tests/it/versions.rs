//! Versions side by side: a sticky split by request key, promotion and
//! rollback without a restart, and the version (and why) in every trace.

use std::collections::BTreeMap;

use glassbox_server::Config;
use serde_json::Value;

use crate::support::{Reply, TestServer, echo, write};

/// Runs one request with `key` in the `X-Glassbox-Key` header; returns the
/// version that answered and the request id.
fn run_keyed(s: &TestServer, key: &str) -> (String, String) {
    let r = s.send(
        "POST",
        "/v1/topologies/echo/runs",
        &[("x-glassbox-key", key)],
        r#"{"question": "hi"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    let version = body["version"].as_str().unwrap().to_string();
    let text = body["output"]["text"].as_str().unwrap();
    assert!(text.starts_with(&format!("{version}: ")), "{text}");
    (version, body["request_id"].as_str().unwrap().to_string())
}

fn split(s: &TestServer, weights: &str) -> Reply {
    s.send(
        "PUT",
        "/v1/topologies/echo/split",
        &[],
        &format!(r#"{{"weights": {weights}}}"#),
    )
}

fn two_versions() -> TestServer {
    TestServer::start(
        &[
            ("a-echo.yaml", &echo("echo", "1.0.0")),
            ("b-echo.yaml", &echo("echo", "1.1.0")),
        ],
        Config::default(),
    )
}

#[test]
fn two_files_of_one_id_serve_side_by_side_with_the_first_promoted() {
    let s = two_versions();
    let v = s.get("/v1/topologies/echo/versions", None).json();
    assert_eq!(v["promoted"], "1.0.0", "{v}");
    let versions: Vec<&str> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["1.0.0", "1.1.0"]);
    assert_eq!(
        v["versions"][1]["percent"], 0,
        "a new version takes no traffic"
    );
    let list = s.get("/v1/topologies", None).json();
    assert_eq!(list["topologies"][0]["version"], "1.0.0", "{list}");
    assert_eq!(list["topologies"][0]["versions"][1], "1.1.0", "{list}");
    // Default: every request on the promoted version, whatever its key.
    for k in 0..20 {
        assert_eq!(run_keyed(&s, &format!("user-{k}")).0, "1.0.0");
    }
    // A third file with a version already served is refused.
    write(&s.path("c-echo.yaml"), &echo("echo", "1.1.0"));
    let list = s.wait_for("/v1/topologies", None, |r| {
        !r.json()["problems"].as_array().unwrap().is_empty()
    });
    assert!(
        list.json()["problems"][0]["message"]
            .as_str()
            .unwrap()
            .contains("version `1.1.0` of topology `echo` is already served from"),
        "{}",
        list.text
    );
}

#[test]
fn a_split_is_sticky_by_key_and_the_trace_says_why() {
    let s = two_versions();
    let r = split(&s, r#"{"1.0.0": 50, "1.1.0": 50}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["split"][0]["version"], "1.1.0", "canaries first");

    let mut first: BTreeMap<String, String> = BTreeMap::new();
    let mut canary_request = None;
    for k in 0..40 {
        let key = format!("user-{k}");
        let (version, rid) = run_keyed(&s, &key);
        if version == "1.1.0" {
            canary_request.get_or_insert(rid);
        }
        first.insert(key, version);
    }
    let on_canary = first.values().filter(|v| *v == "1.1.0").count();
    assert!(
        (5..=35).contains(&on_canary),
        "a 50/50 split sent {on_canary} of 40 keys to the canary"
    );
    // Same key, same version, every time.
    for (key, version) in &first {
        for _ in 0..3 {
            assert_eq!(&run_keyed(&s, key).0, version, "key {key} moved");
        }
    }
    // The OpenAI `user` field is a key too, and agrees with the header.
    let (key, version) = first.iter().next().unwrap();
    let r = s.post(
        "/v1/chat/completions",
        None,
        &format!(
            r#"{{"model": "echo", "user": "{key}", "messages": [{{"role": "user", "content": "hi"}}]}}"#
        ),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let text = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.starts_with(&format!("{version}: ")), "{text}");
    // `?key=` on a run.
    let r = s.post(
        &format!("/v1/topologies/echo/runs?key={key}"),
        None,
        r#"{"question": "hi"}"#,
    );
    assert_eq!(&r.json()["version"], &Value::from(version.as_str()));

    // The trace: its version, and why, as a fact and in words (en and zh).
    let rid = canary_request.expect("some key went to the canary");
    let t = s.get(&format!("/v1/traces/{rid}"), None).json();
    let record = &t["request"];
    assert_eq!(record["version"], "1.1.0", "{t}");
    let fact = &record["explanation"]["facts"][0];
    assert_eq!(fact["kind"], "topology", "{fact}");
    let why = &fact["facts"][0];
    assert_eq!(why["fact"], "version_chosen", "{why}");
    assert_eq!(why["role"], "canary");
    assert_eq!(why["key_from"], "header");
    assert!(
        why["bucket"].as_u64().unwrap() < 50,
        "canary buckets come first: {why}"
    );
    let text = record["explanation"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Version 1.1.0 (canary) served the request: the request key"),
        "{text}"
    );
    assert!(
        text.contains("50% share of the split 1.1.0 50% / 1.0.0 50%"),
        "{text}"
    );
}

#[test]
fn promote_and_rollback_take_effect_without_a_restart() {
    let s = two_versions();
    assert_eq!(run_keyed(&s, "alice").0, "1.0.0");

    let r = s.send(
        "POST",
        "/v1/topologies/echo/versions/1.1.0/promote",
        &[],
        "",
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let v = r.json();
    assert_eq!(v["promoted"], "1.1.0");
    assert_eq!(v["rollback_to"], "1.0.0");
    assert!(v["split"].as_array().unwrap().is_empty());
    for k in ["alice", "bob", "carol"] {
        assert_eq!(run_keyed(&s, k).0, "1.1.0");
    }

    let r = s.send("POST", "/v1/topologies/echo/rollback", &[], "");
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["promoted"], "1.0.0");
    for k in ["alice", "bob", "carol"] {
        assert_eq!(run_keyed(&s, k).0, "1.0.0");
    }
    // Nothing earlier to return to now.
    let r = s.send("POST", "/v1/topologies/echo/rollback", &[], "");
    assert_eq!((r.status, r.code().as_str()), (409, "nothing_to_roll_back"));

    // Bad requests name what is wrong.
    let r = split(&s, r#"{"1.0.0": 80, "1.1.0": 10}"#);
    assert_eq!((r.status, r.code().as_str()), (400, "bad_split"));
    assert!(r.text.contains("90%"), "{}", r.text);
    let r = split(&s, r#"{"1.0.0": 90, "2.0.0": 10}"#);
    assert_eq!((r.status, r.code().as_str()), (404, "version_not_found"));
    let r = s.send(
        "POST",
        "/v1/topologies/nope/versions/1.0.0/promote",
        &[],
        "",
    );
    assert_eq!((r.status, r.code().as_str()), (404, "topology_not_found"));

    // A version's file removed: its traffic returns to the promoted one.
    split(&s, r#"{"1.0.0": 0, "1.1.0": 100}"#);
    assert_eq!(run_keyed(&s, "alice").0, "1.1.0");
    std::fs::remove_file(s.path("b-echo.yaml")).unwrap();
    s.wait_for("/v1/topologies/echo/versions", None, |r| {
        r.json()["versions"]
            .as_array()
            .is_some_and(|v| v.len() == 1)
    });
    assert_eq!(run_keyed(&s, "alice").0, "1.0.0");
}

#[test]
fn a_single_version_adds_nothing_to_the_explanation() {
    let s = TestServer::start(&[("echo.yaml", &echo("echo", "1.0.0"))], Config::default());
    let (_, rid) = run_keyed(&s, "alice");
    let t = s.get(&format!("/v1/traces/{rid}"), None).json();
    let text = t["request"]["explanation"]["text"].as_str().unwrap();
    assert!(!text.contains("Version"), "{text}");
}

#[test]
fn the_compare_report_puts_the_two_versions_side_by_side() {
    let s = two_versions();
    split(&s, r#"{"1.0.0": 50, "1.1.0": 50}"#);
    let mut on = BTreeMap::<String, u64>::new();
    for k in 0..30 {
        *on.entry(run_keyed(&s, &format!("user-{k}")).0).or_default() += 1;
    }
    let r = s.get("/v1/reports/compare?topology=echo&a=1.0.0&b=1.1.0", None);
    assert_eq!(r.status, 200, "{}", r.text);
    let c = r.json();
    assert_eq!(c["requests"]["a"], on["1.0.0"], "{c}");
    assert_eq!(c["requests"]["b"], on["1.1.0"], "{c}");
    assert!(c["method"].as_str().unwrap().contains("Mann-Whitney U"));
    assert_eq!(c["latency_ms"]["test"]["test"], "mann_whitney_u", "{c}");
    assert_eq!(c["nodes"][0]["node"], "answer");
    // One path on both sides: the path mix cannot differ.
    assert_eq!(c["path_test"]["significant"], false, "{c}");
    let r = s.get("/v1/reports/compare?topology=echo&a=1.0.0", None);
    assert_eq!((r.status, r.code().as_str()), (400, "bad_query"));
    assert!(r.text.contains("`b` is required"), "{}", r.text);
}
