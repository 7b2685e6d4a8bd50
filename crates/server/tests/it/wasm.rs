//! Custom steps (`wasm`) behind the server: a step that traps fails its
//! request with a stable code in a kept trace, and the server goes on
//! serving, that topology and the others.

use std::path::PathBuf;

use glassbox_server::Config;
use serde_json::json;
use sha2::Digest;

use crate::support::{TestServer, echo};

/// A topology running the Rust example step with `settings`.
fn step(id: &str, settings: &str) -> String {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let status = std::process::Command::new(root.join("scripts/build-wasm-examples.sh"))
        .status()
        .unwrap();
    assert!(status.success(), "scripts/build-wasm-examples.sh failed");
    let path = root.join("target/wasm-examples/cleaner.wasm");
    let hash: String = sha2::Sha256::digest(std::fs::read(&path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "topology_id: {id}\nversion: 1.0.0\nnodes:\n  - id: clean\n    type: wasm\n    config: {{ component: {}, sha256: {hash}, settings: {settings} }}\n",
        path.display()
    )
}

#[test]
fn a_trapping_step_fails_its_request_and_the_server_goes_on() {
    let s = TestServer::start(
        &[
            (
                "trap.yaml",
                &step("trap", "{ words: [x], misbehave: trap }"),
            ),
            ("clean.yaml", &step("clean", "{ words: [secret] }")),
            ("echo.yaml", &echo("echo", "1.0.0")),
        ],
        Config::default(),
    );
    let body = json!({"question": "my secret"}).to_string();
    for _ in 0..3 {
        let r = s.post("/v1/topologies/trap/runs", None, &body);
        assert_eq!(r.status, 500, "{}", r.text);
        let failed = r.json();
        assert_eq!(failed["error"]["code"], "node_failed", "{failed}");
        let id = failed["request_id"].as_str().unwrap();
        let t = s.get(&format!("/v1/traces/{id}"), None).json();
        assert_eq!(t["spans"][0]["error"]["code"], "wasm_trap", "{t}");

        let r = s.post("/v1/topologies/clean/runs", None, &body);
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(r.json()["output"]["text"], "my ***");
        let r = s.post("/v1/topologies/echo/runs", None, &body);
        assert_eq!(r.status, 200, "{}", r.text);
    }
    assert_eq!(s.get("/healthz", None).status, 200);
}
