//! Runs, topologies, traces, reports, metrics, health and the dashboard.

use glassbox_server::Config;
use serde_json::json;

use crate::support::{MODERATION, TestServer};

fn server() -> TestServer {
    TestServer::start(
        &[
            ("moderation.yaml", MODERATION),
            (
                "broken.yaml",
                "topology_id: broken\nversion: 1.0.0\nnodes:\n  - id: a\n    type: retriever\n",
            ),
        ],
        Config::default(),
    )
}

#[test]
fn a_run_returns_output_path_receipt_and_explanation_and_is_traced() {
    let s = server();
    let r = s.post(
        "/v1/topologies/moderation/runs",
        None,
        &json!({"question": "What is the price of Pro?"}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["status"], "ok");
    assert!(
        body["output"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Plans start at $9")
    );
    let taken: Vec<&str> = body["path"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["status"] == "succeeded")
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(taken, ["route", "pricing_answer", "check"], "{body}");
    assert!(body["receipt"]["total"].as_str().is_some(), "{body}");
    assert!(body["explanation"].as_str().unwrap().contains("`pricing`"));
    let id = body["request_id"].as_str().unwrap().to_string();
    assert_eq!(r.header("x-request-id"), Some(id.as_str()));

    let t = s.get(&format!("/v1/traces/{id}"), None);
    assert_eq!(t.status, 200, "{}", t.text);
    let t = t.json();
    assert_eq!(t["request_id"], id.as_str());
    assert_eq!(t["request"]["topology_id"], "moderation");
    assert_eq!(t["spans"].as_array().unwrap().len(), 3);
    assert_eq!(t["receipt"], body["receipt"]);
    assert_eq!(t["explanation"], body["explanation"]);
    assert!(
        t["input_summary"]
            .as_str()
            .unwrap()
            .contains("price of Pro")
    );
    assert!(
        t["output_summary"]
            .as_str()
            .unwrap()
            .contains("Plans start")
    );

    let list = s.get(
        "/v1/traces?topology=moderation&status=ok&sort=slowest&limit=10",
        None,
    );
    assert_eq!(list.status, 200, "{}", list.text);
    let traces = list.json()["traces"].as_array().unwrap().clone();
    assert!(
        traces.iter().any(|t| t["request_id"] == id.as_str()),
        "{traces:?}"
    );
    let none = s.get("/v1/traces?topology=moderation&status=failed", None);
    assert_eq!(none.json()["traces"].as_array().unwrap().len(), 0);
}

#[test]
fn bad_runs_get_json_errors_with_codes() {
    let s = server();
    let r = s.post("/v1/topologies/nope/runs", None, "{}");
    assert_eq!((r.status, r.code().as_str()), (404, "topology_not_found"));
    assert!(
        r.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("moderation")
    );
    let r = s.post("/v1/topologies/moderation/runs", None, "[1]");
    assert_eq!((r.status, r.code().as_str()), (400, "bad_input"));
    let r = s.post("/v1/topologies/moderation/runs", None, "{not json");
    assert_eq!((r.status, r.code().as_str()), (400, "invalid_json"));
    let r = s.get("/v1/traces/not-an-id", None);
    assert_eq!((r.status, r.code().as_str()), (400, "bad_request_id"));
    let r = s.get("/v1/traces/00000000-0000-0000-0000-000000000000", None);
    assert_eq!((r.status, r.code().as_str()), (404, "trace_not_found"));
    let r = s.get("/v1/traces?sort=fastest", None);
    assert_eq!((r.status, r.code().as_str()), (400, "bad_query"));
    let r = s.get("/v1/nothing-here", None);
    assert_eq!((r.status, r.code().as_str()), (404, "not_found"));
}

/// Issue 14, item 9: axum's own rejections (a path that is not UTF-8, a
/// query of the wrong type, a method the route lacks) were plain text.
#[test]
fn rejections_and_fallbacks_are_json_too() {
    let s = server();
    let r = s.get("/v1/traces/%ff%fe", None);
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "bad_path"),
        "{}",
        r.text
    );
    let r = s.get("/v1/traces?limit=-1", None);
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "bad_query"),
        "{}",
        r.text
    );
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("limit"),
        "{}",
        r.text
    );
    let r = s.get("/v1/admin/reload", None);
    assert_eq!(
        (r.status, r.code().as_str()),
        (405, "method_not_allowed"),
        "{}",
        r.text
    );
    assert_eq!(r.header("allow"), Some("POST"));
    let r = s.raw(
        &format!("DELETE /v1/traces HTTP/1.1\r\nHost: {}", s.addr()),
        "",
    );
    assert_eq!((r.status, r.code().as_str()), (405, "method_not_allowed"));
    let r = s.get("/assets/..%2Fsecret", None);
    assert_eq!((r.status, r.code().as_str()), (404, "asset_not_found"));
}

#[test]
fn topologies_show_their_graph_and_invalid_files_are_reported() {
    let s = server();
    let list = s.get("/v1/topologies", None);
    assert_eq!(list.status, 200, "{}", list.text);
    let list = list.json();
    let ids: Vec<&str> = list["topologies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["moderation"]);
    let problems = list["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{list}");
    assert!(
        problems[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("broken.yaml")
    );
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("retriever"),
        "{list}"
    );

    let t = s.get("/v1/topologies/moderation", None).json();
    assert_eq!(t["version"], "1.0.0");
    assert!(t["file"].as_str().unwrap().ends_with("moderation.yaml"));
    assert_eq!(t["streaming"], "buffered");
    let nodes = t["graph"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 5);
    assert_eq!(nodes[0]["id"], "route");
    assert_eq!(nodes[0]["type"], "router");
    assert_eq!(nodes[0]["resource"]["type"], "cpu");
    assert_eq!(nodes[0]["entry"], true);
    let edges = t["graph"]["edges"].as_array().unwrap();
    assert!(
        edges.contains(
            &json!({"from": "route", "to": "refuse", "condition": "abuse", "description": null})
        ),
        "{edges:?}"
    );
    assert!(edges.contains(
        &json!({"from": "refuse", "to": "check", "condition": null, "description": null})
    ));
}

#[test]
fn reports_give_cost_and_latency_percentiles_by_day() {
    let s = server();
    for q in ["What is the price of Pro?", "hello", "you idiot"] {
        let r = s.post(
            "/v1/topologies/moderation/runs",
            None,
            &json!({"question": q}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.text);
    }
    let r = s.wait_for(
        "/v1/reports/summary?topology=moderation&group_by=day",
        None,
        |r| r.status == 200 && r.json()["groups"][0]["requests"] == 3,
    );
    let rep = r.json();
    assert_eq!(rep["group_by"], "day");
    let g = &rep["groups"][0];
    assert_eq!(g["topology_id"], "moderation");
    assert_eq!(g["group"].as_str().unwrap().len(), "2026-11-30".len());
    for p in ["p50", "p95", "p99"] {
        assert!(g["latency_ms"][p].as_f64().unwrap() > 0.0, "{g}");
        assert!(g["cost"][p].as_f64().unwrap() > 0.0, "{g}");
    }
    let alias = s.get("/v1/reports?topology=moderation&group_by=day", None);
    assert_eq!(alias.json(), rep);
    // Time buckets: the three requests fall in one minute bucket or two,
    // each named by its start in UTC.
    let minutes = s
        .get("/v1/reports?topology=moderation&group_by=1m", None)
        .json();
    assert_eq!(minutes["group_by"], "1m");
    let buckets = minutes["groups"].as_array().unwrap();
    let counted: u64 = buckets
        .iter()
        .map(|g| g["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 3);
    for g in buckets {
        let name = g["group"].as_str().unwrap();
        assert!(
            name.ends_with(":00Z") && name.len() == "2026-12-01T19:25:00Z".len(),
            "{name}"
        );
    }
    let r = s.get("/v1/reports/summary?group_by=month", None);
    assert_eq!((r.status, r.code().as_str()), (400, "bad_query"));
    assert!(r.text.contains("1m, 5m, 15m, 1h, 6h, 1d, 1w"), "{}", r.text);
    let r = s.get("/v1/reports/weekly", None);
    assert_eq!((r.status, r.code().as_str()), (404, "report_not_found"));
}

#[test]
fn metrics_export_the_documented_series() {
    let s = server();
    let r = s.post(
        "/v1/topologies/moderation/runs",
        None,
        r#"{"question": "hi"}"#,
    );
    assert_eq!(r.status, 200);
    let text = s.get("/metrics", None).text;
    for series in [
        r#"glassbox_requests_total{topology="moderation",status="ok"} 1"#,
        r#"glassbox_request_duration_seconds_count{topology="moderation"} 1"#,
        r#"glassbox_node_duration_seconds_count{topology="moderation",node="route"} 1"#,
        r#"glassbox_cost_total{topology="moderation",currency="USD"}"#,
        r#"glassbox_in_flight_requests{topology="moderation"} 0"#,
        "glassbox_trace_queue_depth ",
        "glassbox_topologies 1",
    ] {
        assert!(text.contains(series), "missing `{series}` in\n{text}");
    }
}

#[test]
fn health_readiness_and_dashboard_are_public() {
    let s = server();
    assert_eq!(s.get("/healthz", None).json()["status"], "ok");
    assert_eq!(s.get("/readyz", None).status, 200);
    let page = s.get("/", None);
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.text.contains("<html"), "{}", page.text);
    let js = s.get("/assets/app.js", None);
    assert_eq!(js.status, 200);
    assert!(
        js.header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    assert_eq!(s.get("/assets/missing.js", None).status, 404);
}

#[test]
fn shutdown_drains_and_flushes_traces() {
    let s = server();
    for _ in 0..5 {
        assert_eq!(
            s.post(
                "/v1/topologies/moderation/runs",
                None,
                r#"{"question": "hi"}"#
            )
            .status,
            200
        );
    }
    let store = s.store.clone();
    let (stats, _keep) = s.stop();
    assert_eq!(stats.requests_written, 5);
    let mut db = glassbox_store::open_store(&glassbox_store::StoreUrl::Sqlite(store)).unwrap();
    assert_eq!(db.counts().unwrap().0, 5);
}
