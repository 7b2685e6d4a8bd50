//! Secrets never shown (issue #14, item 4): node configs in the API, URL
//! userinfo in run results and traces, linked files in `problems`.

use glassbox_server::Config;

use crate::support::TestServer;

const LEAKY: &str = r#"topology_id: leaky
version: 1.0.0
nodes:
  - id: fetch
    type: http
    config:
      url: "http://bob:hunter2@127.0.0.1:9/x"
      method: GET
      allow_hosts: ["127.0.0.1"]
      headers: { X-Internal-Token: tok-abc123, Authorization: "Bearer ${env:GLASSBOX_TEST_UNSET_TOKEN}" }
"#;

#[test]
fn get_topology_masks_header_tokens_and_userinfo() {
    // `${env:…}` is unset: the node cannot build, so the file is a problem
    // whose diagnostics must not quote the header either.
    let with_literal = LEAKY.replace(
        ", Authorization: \"Bearer ${env:GLASSBOX_TEST_UNSET_TOKEN}\"",
        "",
    );
    let server = TestServer::start(
        &[
            ("leaky.yaml", &with_literal),
            ("unset.yaml", &LEAKY.replace("leaky", "unset")),
        ],
        Config::default(),
    );
    let r = server.get("/v1/topologies/leaky", None);
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(!r.text.contains("tok-abc123"), "{}", r.text);
    assert!(!r.text.contains("hunter2"), "{}", r.text);
    let config = &r.json()["spec"]["nodes"][0]["config"];
    assert_eq!(config["headers"]["X-Internal-Token"], "***");
    assert_eq!(config["url"], "http://127.0.0.1:9/x");

    let list = server.get("/v1/topologies", None);
    let problem = list.json()["problems"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(problem.contains("GLASSBOX_TEST_UNSET_TOKEN"), "{problem}");
    assert!(!list.text.contains("tok-abc123"), "{}", list.text);
    assert!(!list.text.contains("hunter2"), "{}", list.text);
}

#[test]
fn userinfo_is_stripped_from_run_results_and_traces() {
    let server = TestServer::start(
        &[(
            "leaky.yaml",
            &LEAKY.replace(
                ", Authorization: \"Bearer ${env:GLASSBOX_TEST_UNSET_TOKEN}\"",
                "",
            ),
        )],
        Config::default(),
    );
    // Port 9 on loopback: the connection is refused; the error names the URL.
    let r = server.post("/v1/topologies/leaky/runs", None, "{}");
    assert!(r.status >= 400, "{}", r.text);
    assert!(!r.text.contains("hunter2"), "{}", r.text);
    let id = r.json()["request_id"].as_str().unwrap().to_string();
    let trace = server.wait_for(&format!("/v1/traces/{id}"), None, |t| t.status == 200);
    assert!(!trace.text.contains("hunter2"), "{}", trace.text);
    assert!(!trace.text.contains("bob:"), "{}", trace.text);
}

#[cfg(unix)]
#[test]
fn a_linked_secrets_file_is_not_quoted_in_problems() {
    let outside = tempfile::tempdir().unwrap();
    let secrets = outside.path().join("prod.env");
    std::fs::write(
        &secrets,
        "OPENAI_API_KEY=sk-live-0123456789\nDB_PASSWORD=hunter2\n",
    )
    .unwrap();
    let server = TestServer::start(&[], Config::default());
    std::os::unix::fs::symlink(&secrets, server.path("leak.yaml")).unwrap();
    let list = server.wait_for("/v1/topologies", None, |r| {
        r.json()["problems"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    });
    let message = list.json()["problems"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("outside the topologies directory"),
        "{message}"
    );
    assert!(!list.text.contains("sk-live"), "{}", list.text);
    assert!(!list.text.contains("hunter2"), "{}", list.text);
}

#[test]
fn diagnostics_mask_secret_values_in_snippets() {
    // Invalid (an unknown field on the header's line), inside the directory:
    // the snippet is shown, the token is not.
    let text = r#"topology_id: bad
version: 1.0.0
nodes:
  - id: fetch
    type: http
    config: { url: "http://127.0.0.1:9/x", allow_hosts: ["127.0.0.1"], headers: { X-Internal-Token: tok-abc123 }, nope: 1 }
"#;
    let server = TestServer::start(&[("bad.yaml", text)], Config::default());
    let list = server.get("/v1/topologies", None);
    let message = list.json()["problems"][0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("nope"), "{message}");
    assert!(!message.contains("tok-abc123"), "{message}");
}
