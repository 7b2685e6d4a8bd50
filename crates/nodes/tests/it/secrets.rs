//! Issue 33, F1 and F2: topology authors get none of the server's secrets.
//! Secret references stand only in fields meant for secrets, read only what
//! the operator allows, and a credential goes only to the hosts it is
//! bound to. Real local servers record what reached them.

use std::collections::BTreeMap;

use glassbox_engine::RunOptions;
use glassbox_nodes::outbound::ServerAllow;
use glassbox_topology::secret_access::SecretAccess;
use glassbox_topology::{Source, TopologyError};
use serde_json::json;

use crate::outbound::{ok, stub};
use crate::support::{http_topology, try_build, try_build_with};

/// F1: a `template` printed `${env:GLASSBOX_API_KEY}` and
/// `${file:/etc/hostname}` to a run-scope caller. Validation now reports
/// each reference outside a secret field, with its location and a hint;
/// the one in a header stays legal.
#[test]
fn secrets_references_outside_secret_fields_are_rejected_where_they_stand() {
    let text = r#"topology_id: leak
version: "1"
nodes:
  - id: prompt
    type: template
    config:
      template: "key=${env:GLASSBOX_API_KEY} f=${file:/etc/hostname} {{ input.question }}"
  - id: fetch
    type: http
    config:
      url: "https://api.example.com/x?key=${env:SEARCH_KEY}"
      allow_hosts: [api.example.com]
      method: POST
      body: { note: "${env:HOME}" }
      headers: { Authorization: "Bearer ${env:SEARCH_KEY}" }
edges:
  - { from: prompt, to: fetch }
"#;
    let registry = glassbox_nodes::registry();
    let report = match glassbox_topology::load_source(
        Source::new("leak.yaml", text),
        &registry.kind_set(),
    ) {
        Err(TopologyError::Invalid(r)) => r,
        Ok(_) => panic!("a template quoting the server's key validated"),
        Err(e) => panic!("{e}"),
    };
    let misplaced: Vec<(String, String, Option<String>)> = report
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("not meant for secrets"))
        .map(|d| (report.location(d), d.path.clone(), d.hint.clone()))
        .collect();
    let paths: Vec<&str> = misplaced.iter().map(|(_, p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "nodes[0].config.template",
            "nodes[1].config.url",
            "nodes[1].config.body.note"
        ],
        "{}",
        report.render(false)
    );
    // file:line:column of the value (the column depends on quoting).
    assert!(misplaced[0].0.starts_with("leak.yaml:7:"), "{misplaced:?}");
    assert!(misplaced[1].0.starts_with("leak.yaml:11:"), "{misplaced:?}");
    assert!(misplaced[2].0.starts_with("leak.yaml:14:"), "{misplaced:?}");
    for (_, _, hint) in &misplaced {
        assert!(
            hint.as_deref().unwrap_or("").contains("headers"),
            "{hint:?}"
        );
    }
    let rendered = report.render(false);
    assert!(!rendered.contains("config.headers"), "{rendered}");
}

/// An `http` node calling the local stub on `port` with one header
/// (`Name: "value"`).
fn fetch_with_header(port: u16, header: &str) -> String {
    http_topology(&format!(
        r#"{{ url: "http://127.0.0.1:{port}/", allow_hosts: ["127.0.0.1"], headers: {{ {header} }} }}"#
    ))
}

/// F1: any readable absolute path was accepted (`/etc/hostname` reached
/// an upstream as a header). Files are read only under the allowed
/// directories; the upstream receives nothing.
#[tokio::test]
async fn secrets_files_outside_the_allowed_directories_are_not_read() {
    let upstream = stub(vec![ok("{}")]);
    let text = fetch_with_header(upstream.port, r#"X-Host: "${file:/etc/hostname}""#);
    let err = try_build("h.yaml", &text).err().unwrap().to_string();
    assert!(err.contains("`/etc/hostname`"), "{err}");
    assert!(err.contains("/run/secrets"), "{err}");
    assert!(upstream.seen.lock().unwrap().is_empty());
}

/// F2: a credential bound to its hosts (`[secrets.hosts]`) is never sent to
/// another one, neither through `api_key_env` (model backends) nor a header
/// reference (`http`). `PATH` stands in for a key: it is set in every test
/// environment, so before the fix its value did reach the upstream.
#[tokio::test]
async fn secrets_credentials_are_sent_only_to_their_hosts() {
    let upstream = stub(vec![ok(
        r#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    )]);
    let allow = || ServerAllow {
        secrets: SecretAccess {
            hosts: BTreeMap::from([("PATH".to_string(), vec!["api.openai.com".to_string()])]),
            ..SecretAccess::default()
        },
        ..ServerAllow::default()
    };
    let openai = format!(
        r#"
topology_id: remote
version: "1"
nodes:
  - id: llm
    type: llm_inference
    config: {{ backend: openai, base_url: "http://127.0.0.1:{}/v1", model: m, api_key_env: PATH, allow_hosts: ["127.0.0.1"] }}
"#,
        upstream.port
    );
    let outcome = match try_build_with("remote.yaml", &openai, allow()) {
        Ok(p) => Some(
            p.run(json!({"question": "hi"}), RunOptions::default())
                .await,
        ),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("`PATH`"), "{e}");
            assert!(e.contains("`127.0.0.1`"), "{e}");
            assert!(e.contains("`api.openai.com`"), "{e}");
            None
        }
    };
    let http = fetch_with_header(upstream.port, r#"Authorization: "Bearer ${env:PATH}""#);
    if let Ok(p) = try_build_with("h.yaml", &http, allow()) {
        let _ = p.run(json!({}), RunOptions::default()).await;
    }
    let seen = upstream.seen.lock().unwrap().join("\n");
    assert!(seen.is_empty(), "the upstream received: {seen}");
    assert!(outcome.is_none(), "the node built and ran");
}

/// F2 as reported: `api_key_env: GLASSBOX_API_KEY` (the server's admin
/// key) is refused at build, whatever the host.
#[test]
fn secrets_the_servers_own_keys_are_never_an_api_key() {
    let text = r#"
topology_id: remote
version: "1"
nodes:
  - id: llm
    type: llm_inference
    config: { backend: openai, base_url: "https://api.openai.com/v1", model: m, api_key_env: GLASSBOX_API_KEY }
"#;
    let err = try_build("remote.yaml", text).err().unwrap().to_string();
    assert!(err.contains("`GLASSBOX_API_KEY`"), "{err}");
    assert!(err.contains("server's own"), "{err}");
}

/// The kind API (issue 36): a node whose config holds a secret reference
/// keeps its typed config from validation, the reference standing as
/// written (the topology never holds the secret); the build resolves the
/// reference first and the kind types the resolved copy, so what reaches
/// the upstream is the value. `PATH` stands in for a key.
#[tokio::test]
async fn secrets_a_referenced_config_is_typed_at_validation_and_resolved_at_build() {
    let upstream = stub(vec![ok(r#"{"ok":true}"#)]);
    let text = fetch_with_header(upstream.port, r#"X-Key: "k ${env:PATH}""#);
    let registry = glassbox_nodes::registry();
    let validated =
        glassbox_topology::load_source(Source::new("h.yaml", text.as_str()), &registry.kind_set())
            .unwrap_or_else(|e| panic!("{e}"));
    let typed = validated.topology.nodes[0]
        .typed_config
        .as_ref()
        .and_then(|t| t.get::<glassbox_nodes::http::HttpConfig>())
        .expect("validation keeps the typed config");
    assert_eq!(
        typed.headers,
        [("X-Key".to_string(), "k ${env:PATH}".to_string())]
    );
    let p = try_build("h.yaml", &text).unwrap_or_else(|e| panic!("{e}"));
    let out = p.run(json!({}), RunOptions::default()).await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    let seen = upstream
        .seen
        .lock()
        .unwrap()
        .join("\n")
        .to_ascii_lowercase();
    let path = std::env::var("PATH")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        seen.contains(&format!("x-key: k {path}")),
        "the upstream received: {seen}"
    );
}
