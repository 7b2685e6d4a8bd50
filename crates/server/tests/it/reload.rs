//! Hot reload: edits are picked up, a bad edit keeps the previous version,
//! a deleted file unloads.

use glassbox_server::Config;
use serde_json::Value;

use crate::support::{TestServer, echo, write};

fn answer(s: &TestServer, id: &str) -> String {
    let r = s.post(
        &format!("/v1/topologies/{id}/runs"),
        None,
        r#"{"question": "hi"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["output"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no output text: {}", r.text))
        .to_string()
}

fn version(r: &crate::support::Reply) -> Value {
    r.json()["version"].clone()
}

#[test]
fn good_edits_are_picked_up_and_bad_edits_keep_the_old_version() {
    let s = TestServer::start(&[("echo.yaml", &echo("echo", "1.0.0"))], Config::default());
    assert!(answer(&s, "echo").contains("1.0.0: hi"));

    write(&s.path("echo.yaml"), &echo("echo", "2.0.0"));
    s.wait_for("/v1/topologies/echo", None, |r| version(r) == "2.0.0");
    assert!(answer(&s, "echo").contains("2.0.0: hi"));

    write(
        &s.path("echo.yaml"),
        "topology_id: echo\nversion: 3.0.0\nnodes:\n  - id: answer\n    type: templat\n",
    );
    let detail = s.wait_for("/v1/topologies/echo", None, |r| {
        !r.json()["reload_error"].is_null()
    });
    assert_eq!(version(&detail), "2.0.0", "the previous version stays live");
    assert!(
        detail.json()["reload_error"]
            .as_str()
            .unwrap()
            .contains("templat"),
        "{}",
        detail.text
    );
    let list = s.get("/v1/topologies", None).json();
    assert_eq!(list["problems"][0]["still_serving"], "echo", "{list}");
    assert!(answer(&s, "echo").contains("2.0.0: hi"));

    // Fixing the file clears the problem.
    write(&s.path("echo.yaml"), &echo("echo", "4.0.0"));
    let detail = s.wait_for("/v1/topologies/echo", None, |r| version(r) == "4.0.0");
    assert!(detail.json()["reload_error"].is_null());
}

#[test]
fn new_files_load_and_deleted_files_unload() {
    let s = TestServer::start(&[("echo.yaml", &echo("echo", "1.0.0"))], Config::default());
    write(&s.path("other.json"), &serde_json::to_string(&serde_json::json!({
        "topology_id": "other",
        "version": "1.0.0",
        "nodes": [{"id": "a", "type": "template", "config": {"template_id": "t", "template": "other"}}]
    })).unwrap());
    s.wait_for("/v1/topologies/other", None, |r| r.status == 200);
    assert!(answer(&s, "other").contains("other"));
    std::fs::remove_file(s.path("other.json")).unwrap();
    let r = s.wait_for("/v1/topologies/other", None, |r| r.status == 404);
    assert_eq!(r.code(), "topology_not_found");
    assert_eq!(s.get("/v1/topologies/echo", None).status, 200);
}
